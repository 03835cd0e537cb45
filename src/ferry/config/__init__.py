"""Job files: YAML close to Flink CDC's pipeline format, validated before anything starts.

``load_job(path)`` returns one resolved, frozen :class:`JobConfig`; nothing downstream reads the
environment. The options models this builds on (:mod:`ferry.options`) live outside this package,
so that each sink's options model, which the job model includes, imports nothing of it.
"""

from __future__ import annotations

from ferry.config.exceptions import ConfigError, ConfigProblem
from ferry.config.job import JobConfig, expand_schema_change_tags
from ferry.config.loader import load_job, load_job_text, validate_command
from ferry.pipeline.router import SchemaChangeBehavior

__all__ = [
    "ConfigError",
    "ConfigProblem",
    "JobConfig",
    "SchemaChangeBehavior",
    "expand_schema_change_tags",
    "load_job",
    "load_job_text",
    "validate_command",
]

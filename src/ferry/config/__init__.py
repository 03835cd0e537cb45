"""Job files: YAML close to Flink CDC's pipeline format, validated before anything starts.

``load_job(path)`` returns one resolved, frozen :class:`JobConfig`; nothing downstream reads the
environment. The names are loaded on first use: sink config modules import
:mod:`ferry.config.base`, and the job model imports them in turn.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ferry.config.exceptions import ConfigError, ConfigProblem
    from ferry.config.job import JobConfig, expand_schema_change_tags
    from ferry.config.loader import load_job, load_job_text, validate_command
    from ferry.pipeline.router import SchemaChangeBehavior

_EXPORTS: dict[str, str] = {
    "ConfigError": "ferry.config.exceptions",
    "ConfigProblem": "ferry.config.exceptions",
    "JobConfig": "ferry.config.job",
    "SchemaChangeBehavior": "ferry.pipeline.router",
    "expand_schema_change_tags": "ferry.config.job",
    "load_job": "ferry.config.loader",
    "load_job_text": "ferry.config.loader",
    "validate_command": "ferry.config.loader",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


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

"""Checks of a whole job that its model alone cannot make: what this version of ferry refuses to
run, and which schema changes the sink section accepts. ``ferry validate``, ``ferry run`` and the
control plane make them before anything starts."""

from __future__ import annotations

import re
from collections.abc import Mapping

from ferry.config.job import JobConfig, expand_schema_change_tags
from ferry.exceptions import TerminalError
from ferry.model.events import SchemaChangeType
from ferry.pipeline.router import SchemaChangeBehavior
from ferry.sinks.base.registry import SINKS


class UnsupportedOptionError(TerminalError):
    """A job file asks for something this version of ferry does not do yet; ``key_path`` names the
    key that asks for it (``transform[0].projection``), where known."""

    def __init__(self, message: str, key_path: str | None = None) -> None:
        super().__init__(message)
        self.key_path = key_path


def accepted_schema_changes(
    include: tuple[str, ...] | None, exclude: tuple[str, ...]
) -> frozenset[SchemaChangeType]:
    """The types a sink's ``include.schema.changes`` / ``exclude.schema.changes`` leave; exclude wins."""
    included = expand_schema_change_tags(include) if include is not None else frozenset(SchemaChangeType)
    return included - expand_schema_change_tags(exclude)


def behavior_refusal(sink_type: str, behavior: SchemaChangeBehavior) -> str | None:
    """Why a sink does not take a behaviour (Hologres refuses TRY_EVOLVE), or None."""
    declared = SINKS.get(sink_type)
    if (
        behavior is SchemaChangeBehavior.TRY_EVOLVE
        and declared is not None
        and not declared.capabilities.try_evolve
    ):
        return (
            f"the {sink_type} sink does not take TRY_EVOLVE "
            "(a refused change would leave its table behind the source); use LENIENT or EVOLVE"
        )
    return None


def check_supported(job: JobConfig) -> None:
    """Refuse, before anything starts, what the job asks for and ferry would otherwise ignore."""
    if job.transform:
        from ferry.transform.blocks import stateful_problem, unsupported_problem  # noqa: PLC0415

        stateful = stateful_problem(job)
        if stateful is not None:
            index, key, reason = stateful
            raise UnsupportedOptionError(reason, f"transform[{index}].{key}")
        names = tuple(f.name for f in job.pipeline.user_defined_function)
        unsupported = unsupported_problem(job, names)
        if unsupported is not None:
            index, reason = unsupported
            raise UnsupportedOptionError(reason, f"transform[{index}].projection")
    refusal = behavior_refusal(job.sink.type, job.pipeline.schema_change_behavior)
    if refusal is not None:
        raise UnsupportedOptionError(refusal, "pipeline.schema.change.behavior")
    jaas = job.source.properties.get("sasl.jaas.config")
    if jaas is not None:
        raise UnsupportedOptionError(
            jaas_refusal(jaas, job.source.properties), "source.properties.sasl.jaas.config"
        )


#: ``username="..."`` in a JAAS configuration (the password is never read out of it).
_JAAS_USERNAME = re.compile(r"""\busername\s*=\s*["']([^"']*)["']""")


def jaas_refusal(jaas: str, properties: Mapping[str, str]) -> str:
    """Why ``properties.sasl.jaas.config`` is refused, and what to write instead: Kafka's Java
    clients read JAAS, librdkafka takes the user name and password as settings of their own."""
    mechanism = properties.get("sasl.mechanism")
    if "PlainLoginModule" in jaas:
        mechanism = mechanism or "PLAIN"
    elif "ScramLoginModule" in jaas:
        mechanism = mechanism or "SCRAM-SHA-512"
    found = _JAAS_USERNAME.search(jaas)
    user = found[1] if found else "<user>"
    instead = f"properties.sasl.username: {user}, its password as properties.sasl.password" + (
        f" (with properties.sasl.mechanism: {mechanism})" if mechanism else ""
    )
    if "OAuthBearerLoginModule" in jaas:
        instead = "properties.sasl.oauthbearer.* (librdkafka's OAUTHBEARER settings)"
    return (
        "properties.sasl.jaas.config is a Java JAAS configuration, which the Kafka client of ferry "
        f"(librdkafka) does not read: write {instead} instead"
    )

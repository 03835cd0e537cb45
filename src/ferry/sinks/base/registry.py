"""Every sink type, built from the sinks' own declarations: one line per sink.

Importing this module imports each sink's declaration and options model, never a client library;
:func:`sink_class` imports one when a job names its sink (and names the pip extra it needs).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Union

from pydantic import Field

from ferry.options import SinkConfigBase
from ferry.sinks.base import Sink
from ferry.sinks.base.declaration import SinkDeclaration
from ferry.sinks.base.exceptions import SinkError
from ferry.sinks.fluss import FLUSS
from ferry.sinks.hologres import HOLOGRES
from ferry.sinks.iceberg import ICEBERG
from ferry.sinks.kafka import KAFKA
from ferry.sinks.maxcompute import MAXCOMPUTE
from ferry.sinks.memory import MEMORY, NULL
from ferry.sinks.paimon import PAIMON
from ferry.sinks.selectdb import SELECTDB
from ferry.sinks.starrocks import STARROCKS

#: Every sink type a job file may name, by that name.
SINKS: Mapping[str, SinkDeclaration] = {
    d.type: d
    for d in sorted(
        (FLUSS, HOLOGRES, ICEBERG, KAFKA, MAXCOMPUTE, MEMORY, NULL, PAIMON, SELECTDB, STARROCKS),
        key=lambda d: d.type,
    )
}

#: The sinks that write to a real system (the test doubles left out): the matrix's rows.
DESTINATIONS: Mapping[str, SinkDeclaration] = {t: d for t, d in SINKS.items() if not d.test_double}

if TYPE_CHECKING:
    SinkConfig = SinkConfigBase
else:
    #: The ``sink`` section of a job file: the declared options models, chosen by ``type``.
    SinkConfig = Annotated[Union[tuple(d.config for d in SINKS.values())], Field(discriminator="type")]  # noqa: UP007


def declaration(sink_type: str) -> SinkDeclaration:
    """The declaration of a sink type; an unknown one raises :class:`SinkError` naming the known."""
    try:
        return SINKS[sink_type]
    except KeyError:
        raise SinkError(f"unknown sink type; known: {', '.join(SINKS)}", sink=sink_type) from None


def sink_class(sink_type: str) -> type[Sink]:
    """The class of a sink type, importing its client library only now."""
    return declaration(sink_type).load()


def open_sink(config: SinkConfigBase, *, pipeline: str) -> Sink:
    """The sink of a job's ``sink`` section, for the pipeline named ``pipeline``."""
    cls: Any = sink_class(config.type)
    sink: Sink = cls(config, pipeline=pipeline)
    return sink


__all__ = ["DESTINATIONS", "SINKS", "SinkConfig", "declaration", "open_sink", "sink_class"]

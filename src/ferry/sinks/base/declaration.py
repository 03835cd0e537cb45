"""What a sink declares about itself, in its own folder, without importing its client library.

Each ``ferry.sinks.<type>`` package holds one :class:`SinkDeclaration`: the type name job files
give it, its options model, what it does with each kind of schema change, where its class is and
the pip extra that brings its client library. :mod:`ferry.sinks.base.registry` lists them, one line per
sink; nothing else names the sinks.
"""

from __future__ import annotations

import builtins
import importlib
from dataclasses import dataclass
from typing import get_args

from ferry.options import SinkConfigBase
from ferry.sinks.base import Sink, SinkCapabilities
from ferry.sinks.base.exceptions import MissingExtraError


@dataclass(frozen=True, slots=True)
class SinkDeclaration:
    """One sink type: everything ferry needs to know before it imports the sink."""

    #: The sink type, as job files write it (``sink.type``).
    type: str
    #: The model of the ``sink`` section; its ``type`` field is ``Literal[<type>]``.
    config: builtins.type[SinkConfigBase]
    #: What the sink does with each kind of schema change (the router reads it).
    capabilities: SinkCapabilities
    #: ``module:Class`` of the sink, imported only when a job uses it.
    sink_class: str
    #: The pip extra that installs the sink's client library (``None``: ferry's own dependencies).
    extra: str | None = None
    #: A stand-in that writes to no real system (memory, null): not in the matrix of sinks.
    test_double: bool = False

    def __post_init__(self) -> None:
        tags = get_args(self.config.model_fields["type"].annotation)
        if tags != (self.type,):
            raise ValueError(f"{self.config.__name__}.type is Literal{list(tags)}, not [{self.type!r}]")

    def load(self) -> builtins.type[Sink]:
        """The sink's class, importing its client library only now (a missing extra is named)."""
        module_name, _, class_name = self.sink_class.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            if self.extra is None:
                raise
            raise MissingExtraError(self.type, self.extra, e) from e
        cls = getattr(module, class_name)
        if not (isinstance(cls, builtins.type) and issubclass(cls, Sink)):
            raise TypeError(f"{self.sink_class} is not a Sink")
        return cls

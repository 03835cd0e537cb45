"""The root of every error ferry raises.

Errors carry their context as attributes (table, change, topic, partition, offset) and say whether
retrying can help: a :class:`TransientError` may succeed on a later attempt, a :class:`TerminalError`
never will and stops the pipeline.
"""

from __future__ import annotations


class FerryError(Exception):
    """Base class of all ferry errors."""


class TerminalError(FerryError):
    """An error that retrying cannot fix; the pipeline fails."""


class TransientError(FerryError):
    """An error that may go away on retry (a broker or a catalog briefly unavailable)."""

"""Errors of the Kafka source and the dead-letter producer."""

from __future__ import annotations

from ferry.exceptions import TerminalError, TransientError


class SourceError(TerminalError):
    """The source cannot be read (no topics, an unrecoverable Kafka error)."""


class DeadLetterError(TransientError):
    """A record could not be stored in the dead-letter topic."""


class DeadLetterRefusedError(TerminalError):
    """The broker refused a record for the dead-letter topic for good (authorisation, a topic that
    cannot exist): retrying cannot store it."""

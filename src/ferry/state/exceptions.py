"""Errors of the state store."""

from __future__ import annotations

from ferry.exceptions import TerminalError


class StateStoreError(TerminalError):
    """The state store cannot be opened as configured (a wrong URL, password or path, a database
    that holds no state): the message names the key (``pipeline.state.url``) and what to change."""

"""Persistence: the state store (checkpoints merged across workers, status, schema-change history,
leases) and the tables it shares with the control plane."""

from __future__ import annotations

from ferry.state.store import StateStore

__all__ = ["StateStore"]

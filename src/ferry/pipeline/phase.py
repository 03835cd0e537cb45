"""The phases of a pipeline, as its runner reports them and the control plane keeps them."""

from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    """Where a pipeline is in its life: ``PENDING`` → ``RUNNING`` → ``STOPPING`` → ``STOPPED``,
    or ``FAILED``; ``COMPLETED`` once a bounded run read to its end (as CMF reports a finished
    bounded statement); ``DELETED`` once the control plane deleted it.

    A runner reports ``PENDING``, ``RUNNING``, ``STOPPED`` and ``FAILED`` of its own run.
    """

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    STOPPED = "STOPPED"
    FAILED = "FAILED"
    COMPLETED = "COMPLETED"
    DELETED = "DELETED"

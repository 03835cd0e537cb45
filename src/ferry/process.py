"""Child processes that do not outlive their parent, and how long a process may take to stop."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1

#: How long a process of ferry's may take to end once its pipeline failed, or once it was told to
#: stop beyond what its final checkpoint may wait (``restart-strategy.timeout``); then it is
#: killed (SIGKILL). A pipeline killed so restarts from its last checkpoint, losing nothing.
STOP_GRACE_S = 30.0


def parent_death_hook(sig: signal.Signals = signal.SIGTERM) -> Callable[[], None] | None:
    """A pre-exec hook that sends the child ``sig`` when this process dies (Linux only; None
    elsewhere)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # noqa: PLC0415 - only a process that starts children needs it
    import ctypes.util  # noqa: PLC0415

    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return None
    libc = ctypes.CDLL(libc_name, use_errno=True)
    parent = os.getpid()

    def hook() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:  # the parent already died between fork and prctl
            os.kill(os.getpid(), sig)

    return hook

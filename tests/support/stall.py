"""Telling a stalled process from a slow one on a loaded machine.

A process waiting on nothing, or spinning, has stalled; one that the machine gives little CPU is
only slow. A bound on the clock cannot tell them apart, a bound on the CPU time the process used
can: the work a run needs takes the same CPU seconds whatever the load. :class:`StallWatch` says a
process stalled once it used ``cpu_s`` seconds of CPU, or ``wall_s`` seconds passed (a generous
bound for a process that waits forever without using CPU), since it was started or last made
progress.
"""

from __future__ import annotations

import subprocess
import time

import psutil


class StallWatch:
    def __init__(self, pid: int, *, cpu_s: float, wall_s: float) -> None:
        self.cpu_s = cpu_s
        self.wall_s = wall_s
        self._process = psutil.Process(pid)
        self.progressed()

    def _cpu(self) -> float:
        """CPU seconds the process and its children used so far (0 once it has ended)."""
        try:
            times = self._process.cpu_times()
        except psutil.NoSuchProcess:
            return 0.0
        return times.user + times.system + times.children_user + times.children_system

    def progressed(self) -> None:
        """The process made progress: its budgets start again from now."""
        self._since_cpu = self._cpu()
        self._since_wall = time.monotonic()

    def stalled(self) -> str | None:
        """Why the process counts as stalled (CPU or clock budget spent without progress), or None."""
        cpu = self._cpu() - self._since_cpu
        wall = time.monotonic() - self._since_wall
        if cpu > self.cpu_s:
            return f"used {cpu:.0f} s of CPU ({wall:.0f} s) without progress"
        if wall > self.wall_s:
            return f"made no progress in {wall:.0f} s (using {cpu:.1f} s of CPU)"
        return None


def wait_unless_stalled(process: subprocess.Popen[bytes], *, cpu_s: float, wall_s: float) -> int:
    """The process's exit code once it ends; killed and :class:`StalledError` once it stalls."""
    watch = StallWatch(process.pid, cpu_s=cpu_s, wall_s=wall_s)
    while (code := process.poll()) is None:
        if (stall := watch.stalled()) is not None:
            process.kill()
            process.wait(timeout=30)
            raise StalledError(stall)
        time.sleep(0.1)
    return code


class StalledError(AssertionError):
    """A process was killed because it stalled; the message says how."""

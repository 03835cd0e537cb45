"""What local JVM services (the Kafka broker; in the tests also Kafka Connect, the schema registry and
the Fluss cluster) have in common.

Their jars are the runtime dependencies of a small Maven project (``jars/<name>/pom.xml``),
fetched once into ``<repo>/.cache/<name>/lib`` under a file lock and stamped with the pom's
SHA-256, so that a changed pom fetches again. Each JVM is a child process of its own session on
free ports of 127.0.0.1, writing to a log file; it gets SIGTERM when this Python process dies
unless it is meant to outlive it.
"""

from __future__ import annotations

import abc
import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Self

from ferry.exceptions import FerryError
from ferry.local.ports import HOST, free_ports, port_open
from ferry.process import parent_death_hook

__all__ = [
    "HOST",
    "LOG_TAIL_LINES",
    "POM_FOLDER",
    "STAMP_FILE",
    "JvmService",
    "MavenJars",
    "file_lock",
    "find_java",
    "free_ports",
    "jars",
    "log4j2_xml",
    "pid_alive",
    "pid_runs",
    "port_open",
    "read_tail",
    "run_command",
    "spawn",
    "stop_process",
    "tail",
]

LOG_TAIL_LINES = 60
POM_FOLDER = Path("jars")
"""The checkout's folder of Maven projects, one a service (``jars/<name>/pom.xml``): each lists the
runtime jars of that service, fetched from Maven Central."""
STAMP_FILE = ".ferry-pom-sha256"
PORT_TAKEN = "Address already in use"
"""What an error says when a port was taken between choosing it and binding it."""


# --------------------------------------------------------------------------------------------------
# Logs, locks and ports
# --------------------------------------------------------------------------------------------------


def tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of ``text``."""
    return "\n".join(text.splitlines()[-lines:])


def read_tail(path: Path | None, lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of a log file, or an empty string when there is none."""
    if path is None:
        return ""
    try:
        return tail(path.read_text(encoding="utf-8", errors="replace"), lines)
    except OSError:
        return ""


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock, so that concurrent sessions do not fetch into the cache at once."""
    import fcntl  # noqa: PLC0415 - POSIX only, needed only while fetching

    with path.open("a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


# --------------------------------------------------------------------------------------------------
# Jars fetched with Maven
# --------------------------------------------------------------------------------------------------


def jars(lib: Path) -> list[Path]:
    """The jars in ``lib``, sorted by name (none when the folder does not exist)."""
    return sorted(p for p in lib.iterdir() if p.name.endswith(".jar")) if lib.is_dir() else []


@dataclass(frozen=True)
class MavenJars:
    """The runtime jars of a Maven project of this repository, cached in ``<cache>/lib``.

    ``name`` names the product in messages ("Kafka") and, in lower case, its cache folder;
    ``pom`` is the pom's path in a checkout, ``cache_env`` the environment variable that moves the
    cache folder, ``required`` the prefixes of the jars a complete folder holds, and ``error`` what
    is raised when the jars cannot be had.
    """

    name: str
    pom: Path
    cache_env: str
    required: tuple[str, ...]
    error: type[FerryError]

    def repo_root(self) -> Path | None:
        """The checkout that holds the pom: searched from this file, then from the cwd."""
        for start in (Path(__file__).resolve().parent, Path.cwd().resolve()):
            for folder in (start, *start.parents):
                if (folder / self.pom).is_file():
                    return folder
        return None

    def find_pom(self) -> Path | None:
        """The pom that lists the jars, or None when no checkout of the project can be found."""
        root = self.repo_root()
        return None if root is None else root / self.pom

    def default_cache_dir(self) -> Path:
        """``$<cache_env>`` if set, else ``<repo>/.cache/<name>``, else ``~/.cache/ferry/<name>``
        (the name in lower case)."""
        configured = os.environ.get(self.cache_env)
        if configured:
            return Path(configured).expanduser().resolve()
        root = self.repo_root()
        if root is not None:
            return root / ".cache" / self.name.lower()
        return Path.home() / ".cache" / "ferry" / self.name.lower()

    def complete(self, lib: Path) -> bool:
        """True when ``lib`` holds a jar for every required prefix."""
        names = [jar.name for jar in jars(lib)]
        return all(any(name.startswith(prefix) for name in names) for prefix in self.required)

    def ensure(
        self, cache_dir: Path | None = None, *, pom: Path | None = None, timeout: float = 1800.0
    ) -> Path:
        """Make sure the jars are in ``<cache_dir>/lib`` and return that folder.

        The jars are fetched with Maven when the folder is missing, incomplete, or was filled from
        a different version of the pom; otherwise nothing is fetched. Outside a checkout (no pom) a
        complete folder is used as it is.
        """
        cache = (cache_dir or self.default_cache_dir()).resolve()
        lib = cache / "lib"
        pom = pom or self.find_pom()
        if pom is None:
            if self.complete(lib):
                return lib
            raise self.error(
                f"{self.name} jars are missing from {lib} and {self.pom} cannot be found to fetch them: "
                f"run from a checkout of ferry, or point {self.cache_env} at a folder whose lib/ holds "
                "the jars"
            )
        pom = pom.resolve()
        digest = hashlib.sha256(pom.read_bytes()).hexdigest()
        if self._fetched(lib, digest):
            return lib
        cache.mkdir(parents=True, exist_ok=True)
        with file_lock(cache / ".fetch.lock"):
            if not self._fetched(lib, digest):
                self._fetch(pom, digest, cache, lib, timeout)
        return lib

    def _fetched(self, lib: Path, digest: str) -> bool:
        try:
            stamp = (lib / STAMP_FILE).read_text(encoding="utf-8").strip()
        except OSError:
            return False
        return stamp == digest and self.complete(lib)

    def _fetch(self, pom: Path, digest: str, cache: Path, lib: Path, timeout: float) -> None:
        mvn = shutil.which("mvn")
        if mvn is None:
            raise self.error(
                f"Maven (mvn) is not on PATH; it is needed once to fetch the {self.name} jars into {lib}"
            )
        staging = Path(tempfile.mkdtemp(prefix="lib-fetching-", dir=cache))
        try:
            print(f"Fetching Apache {self.name} jars with Maven into {lib} ...", file=sys.stderr, flush=True)
            command = [
                mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
                f"-DoutputDirectory={staging}", "-DincludeScope=runtime",
            ]  # fmt: skip
            try:
                result = subprocess.run(
                    command, capture_output=True, text=True, timeout=timeout, check=False, cwd=pom.parent
                )
            except subprocess.TimeoutExpired as exc:
                raise self.error(f"Maven did not fetch the {self.name} jars within {timeout:.0f} s") from exc
            if result.returncode != 0:
                raise self.error(
                    f"Maven failed (exit {result.returncode}) to fetch the {self.name} jars with "
                    f"{' '.join(command)}:\n{tail(result.stdout + result.stderr)}"
                )
            if not self.complete(staging):
                found = ", ".join(sorted(entry.name for entry in staging.iterdir())) or "nothing"
                raise self.error(
                    f"Maven ran but the {self.name} jars are incomplete; expected jars starting with "
                    f"{', '.join(self.required)}, found: {found}"
                )
            (staging / STAMP_FILE).write_text(digest + "\n", encoding="utf-8")
            if lib.exists():
                shutil.rmtree(lib)
            staging.rename(lib)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)


# --------------------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------------------

_LOG4J2_XML = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <Console name="STDOUT" target="SYSTEM_OUT">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Root level="{root_level}">
      <AppenderRef ref="STDOUT"/>
    </Root>
{loggers}  </Loggers>
</Configuration>
"""


def log4j2_xml(root_level: str, quiet: Iterable[str] = ()) -> str:
    """A Log4j 2 configuration that logs to stdout at ``root_level``, the ``quiet`` loggers at WARN."""
    loggers = "".join(f'    <Logger name="{name}" level="WARN"/>\n' for name in quiet)
    return _LOG4J2_XML.format(root_level=root_level, loggers=loggers)


def run_command(command: Callable[[], int], error: type[FerryError]) -> int:
    """``command()``'s exit code; an ``error`` it raises is printed as ``error: …`` and exits 1."""
    try:
        return command()
    except error as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def find_java(name: str, error: type[FerryError]) -> str:
    """``$JAVA_HOME/bin/java``, else the ``java`` on the PATH; raises ``error`` naming ``name``."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise error(f"Java is not installed (no java on PATH and no JAVA_HOME); {name} needs Java 17+")
    return java


def spawn(command: list[str], log: Path, cwd: Path, *, detached: bool = False) -> subprocess.Popen[bytes]:
    """Start ``command`` in a session of its own, its output appended to ``log``. Unless
    ``detached``, it gets SIGTERM when this process dies."""
    with log.open("ab") as out:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=None if detached else parent_death_hook(),  # noqa: PLW1509 - PR_SET_PDEATHSIG only
        )


def stop_process(process: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM, up to ``timeout`` seconds to exit, then SIGKILL."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
            return
        except subprocess.TimeoutExpired:
            process.kill()
    process.wait(timeout=30)


def pid_alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    stat = Path(f"/proc/{pid}/stat")
    if Path("/proc/self/stat").exists():
        try:
            fields = stat.read_text(encoding="utf-8", errors="replace").rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return False
        return bool(fields) and fields[0] not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pid_runs(pid: int, *markers: bytes) -> bool:
    """True when ``pid`` is alive and its command line holds every one of ``markers`` (so it is the
    process meant and not a recycled pid); without ``/proc`` the pid is trusted."""
    if not pid_alive(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True
    return all(marker in cmdline for marker in markers)


class JvmService(abc.ABC):
    """A local service of JVMs: started and stopped, or used as a context manager. A failed start
    stops what did start and removes the service's data directory unless it is kept."""

    #: What is raised when the service cannot be fetched, started, reached or stopped.
    error: ClassVar[type[FerryError]] = FerryError
    #: How messages name the service ("the Kafka broker").
    title: ClassVar[str] = "the service"

    data_root: Path | None
    data_dir: Path | None
    keep_data: bool

    @abc.abstractmethod
    def start(self) -> Self:
        """Start the service and wait until it is ready."""

    @abc.abstractmethod
    def stop(self, timeout: float = 30.0) -> None:
        """Stop the service (SIGTERM, then SIGKILL after ``timeout`` seconds)."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _address(self, port: int | None) -> str:
        """``127.0.0.1:PORT``; raises when the service is not started (no port)."""
        if port is None:
            raise self.error(f"{self.title} is not started")
        return f"{HOST}:{port}"

    def _check_ports_free(self, ports: Iterable[int]) -> None:
        """Raise (saying "Address already in use") when one of ``ports`` is taken already."""
        for port in ports:
            if port_open(port):
                raise self.error(f"port {HOST}:{port} is in use ({PORT_TAKEN})")

    def _start_retrying(self, start_once: Callable[[], None], attempts: int = 3) -> None:
        """Call ``start_once``; after a failure clean up, and try again (``attempts`` times in all)
        while the failure is a port that was taken meanwhile."""
        for attempt in range(1, attempts + 1):
            try:
                start_once()
            except self.error as exc:
                self._cleanup_after_failure()
                if PORT_TAKEN in str(exc) and attempt < attempts:
                    continue
                raise
            except BaseException:
                self._cleanup_after_failure()
                raise
            return

    def _new_data_dir(self, prefix: str) -> Path:
        """A new temporary directory (in ``data_root`` if set): the service's data directory."""
        if self.data_root is not None:
            self.data_root.mkdir(parents=True, exist_ok=True)
        self.data_dir = Path(tempfile.mkdtemp(prefix=prefix, dir=self.data_root)).resolve()
        return self.data_dir

    def _remove_data_dir(self) -> None:
        """Delete the data directory, unless it is kept."""
        if self.data_dir is not None and not self.keep_data:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def _cleanup_after_failure(self) -> None:
        keep = self.keep_data
        try:
            self.stop(timeout=10.0)
        finally:
            if self.data_dir is not None and not keep:
                shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None

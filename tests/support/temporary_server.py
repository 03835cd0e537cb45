"""The lifecycle the tests' database servers share: a server lives in a temporary directory of its
own, made when it starts and deleted when it stops, whatever happened in between.

A subclass says how to set the server up in that directory (:meth:`TemporaryServer.set_up`) and
how to shut it down (:meth:`TemporaryServer.shut_down`); a set-up that fails stops what it
started and deletes the directory before the error goes on.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from abc import ABC, abstractmethod
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Self


class TemporaryServer(ABC):
    """A server in a temporary directory: ``with`` starts it and stops it."""

    #: The prefix of the temporary directory's name (``ferry-pg-``).
    directory_prefix: ClassVar[str]
    #: What :attr:`directory` raises before the server started.
    not_started: ClassVar[type[Exception]]

    _dir: Path | None = None

    @property
    def directory(self) -> Path:
        if self._dir is None:
            raise self.not_started("the server is not started")
        return self._dir

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @abstractmethod
    def set_up(self) -> None:
        """Install and start the server in :attr:`directory`."""

    @abstractmethod
    def shut_down(self) -> None:
        """Stop the server, if it runs (its data need not be kept)."""

    def start(self) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix=self.directory_prefix))
        try:
            self.set_up()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the server and delete its directory."""
        directory = self._dir
        if directory is None:
            return
        try:
            self.shut_down()
        finally:
            self._dir = None
            with contextlib.suppress(OSError):
                shutil.rmtree(directory)

"""The local HTTP server under the stand-ins for services that cannot run here (Stream Load,
MaxCompute): a threaded ``http.server`` on a free port of 127.0.0.1, started and stopped, or used as
a context manager. A stand-in implements :meth:`LocalHttpServer.handle`, called for every request
whatever its method, and answers with :func:`reply`."""

from __future__ import annotations

import abc
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, ClassVar, Self

from ferry.local.ports import HOST

__all__ = ["LocalHttpServer", "read_body", "reply"]


def read_body(handler: BaseHTTPRequestHandler) -> bytes:
    """The request's body: by ``Content-Length``, or chunk by chunk for ``Transfer-Encoding: chunked``."""
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        out = bytearray()
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return bytes(out)
            out += handler.rfile.read(size)
            handler.rfile.readline()
    length = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(length) if length else b""


def reply(handler: BaseHTTPRequestHandler, status: int, headers: Mapping[str, str], body: bytes) -> None:
    """Answer with ``status``, ``headers`` and ``body`` (its length sent; no body for ``HEAD``)."""
    handler.send_response(status)
    for key, value in headers.items():
        handler.send_header(key, value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(body)


class LocalHttpServer(abc.ABC):
    """An HTTP server on a free port of 127.0.0.1, serving from a thread of its own."""

    #: The serving thread's name.
    name: ClassVar[str] = "http"
    #: The HTTP version answered: ``HTTP/1.1`` keeps connections open between requests.
    protocol_version: ClassVar[str] = "HTTP/1.0"

    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @abc.abstractmethod
    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        """Answer one request (any method: ``handler.command``)."""

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``; raises when the server is not started."""
        if self._server is None:
            raise RuntimeError(f"the {self.name} server is not started")
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://{self.address}"

    def start(self) -> Self:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = owner.protocol_version
            disable_nagle_algorithm = True  # headers and body leave at once (no delayed-ACK stalls)

            def do_GET(self) -> None:
                owner.handle(self)

            def do_POST(self) -> None:
                owner.handle(self)

            def do_PUT(self) -> None:
                owner.handle(self)

            def do_DELETE(self) -> None:
                owner.handle(self)

            def do_HEAD(self) -> None:
                owner.handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer((HOST, 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name=self.name, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

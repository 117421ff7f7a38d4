"""A TCP proxy in front of a PostgreSQL server, for tests that need a connection to fail at one
exact point of the protocol (a real server, real clients; only the wire between them is cut).

    with PgProxy(cluster.port) as proxy:
        url = proxy.url(cluster.url("chaos"))     # clients connect through the proxy
        proxy.lose_answer(b"read_jobs", b'"body_started": true')
        ...
        proxy.lost.wait(20)                       # the server committed; the client never knew

`lose_answer(marker, containing)`: the next statement whose text has `marker` runs on the server
as usual (its implicit transaction commits before ReadyForQuery), but when its answer contains
`containing`, the answer is dropped and both sides of that connection are closed: the client
sees its connection lost and cannot know whether the statement committed.
`hold(marker)`: from then on every statement with `marker` in its text is held (not sent to the
server) until the proxy closes.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from urllib.parse import urlsplit, urlunsplit


class PgProxy:
    def __init__(self, server_port: int, host: str = "127.0.0.1") -> None:
        self.server = (host, server_port)
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((host, 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._lose: tuple[bytes, bytes] | None = None
        self._hold: bytes | None = None
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self.lost = threading.Event()  # an answer was dropped as lose_answer asked
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, url: str) -> str:
        """`url` with its host and port replaced by the proxy's."""
        parts = urlsplit(url)
        netloc = parts.netloc.rsplit("@", 1)
        address = f"{self.server[0]}:{self.port}"
        return urlunsplit(
            parts._replace(netloc=f"{netloc[0]}@{address}" if len(netloc) == 2 else address)
        )

    def lose_answer(self, marker: bytes, containing: bytes) -> None:
        with self._lock:
            self._lose = (marker, containing)

    def hold(self, marker: bytes) -> None:
        with self._lock:
            self._hold = marker

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for s in [self._listener, *sockets]:
            with contextlib.suppress(OSError):
                s.close()

    def __enter__(self) -> PgProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the wire ------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.server)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, upstream]
            link = _Link(self, client, upstream)
            threading.Thread(target=link.client_to_server, daemon=True).start()
            threading.Thread(target=link.server_to_client, daemon=True).start()


class _Link:
    """One client connection and its server connection."""

    def __init__(self, proxy: PgProxy, client: socket.socket, upstream: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream = upstream
        # (marker, containing) of lose_answer while this connection's answer is watched
        self.watching: tuple[bytes, bytes] | None = None

    def _shut(self) -> None:
        for s in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def client_to_server(self) -> None:
        try:
            while data := self.client.recv(65536):
                with self.proxy._lock:
                    hold = self.proxy._hold
                    lose = self.proxy._lose
                    if lose is not None and lose[0] in data and self.watching is None:
                        self.watching = lose
                        self.proxy._lose = None
                if hold is not None and hold in data and self.watching is None:
                    self.proxy._closed.wait()  # held until the proxy closes
                    return
                self.upstream.sendall(data)
        except OSError:
            pass
        finally:
            self._shut()

    def server_to_client(self) -> None:
        buffer = b""
        answer: list[bytes] = []
        try:
            while data := self.upstream.recv(65536):
                if self.watching is None:
                    self.client.sendall(data)
                    continue
                # Whole messages (type byte, int32 length) until ReadyForQuery ends the answer.
                buffer += data
                while len(buffer) >= 5:
                    length = int.from_bytes(buffer[1:5], "big")
                    if len(buffer) < 1 + length:
                        break
                    message, buffer = buffer[: 1 + length], buffer[1 + length :]
                    answer.append(message)
                    if message[:1] != b"Z":
                        continue
                    whole = b"".join(answer)
                    answer = []
                    if self.watching[1] in whole:
                        self.watching = None
                        self.proxy.lost.set()
                        self._shut()
                        return
                    # (Not the answer asked for: passed on, and the next statement with the
                    # marker is watched.)
                    with self.proxy._lock:
                        if self.proxy._lose is None:
                            self.proxy._lose = self.watching
                    self.watching = None
                    self.client.sendall(whole + buffer)
                    buffer = b""
                    break
        except OSError:
            pass
        finally:
            self._shut()

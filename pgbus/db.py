"""Connections: one-off ones for commands, a shared pool for processes, and what a process
does while the database is unreachable.

During an outage every part of a process (the worker's reads, its heartbeats, the pool) tries
again at most RECONNECT_DELAY apart, so work resumes within a couple of seconds of the server's
return however long it was gone; the outage is logged once when it starts and once when it
ends (`Reachability`), not as a traceback per failed attempt.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from contextlib import AbstractContextManager, nullcontext, suppress
from typing import Any
from urllib.parse import urlsplit

import psycopg
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool, PoolTimeout

from pgbus.config import settings
from pgbus.errors import DatabaseUnreachable

log = logging.getLogger("pgbus")

_pool: ConnectionPool | None = None
_pool_lock = threading.Lock()

# The longest wait between two attempts to reach the database during an outage.
RECONNECT_DELAY = 0.5
# How long a connection attempt may take (an unreachable host, not a refused port).
CONNECT_TIMEOUT = 5
# How long shutdown and heartbeat paths wait for a pooled connection: they must not hang
# while the database is gone.
SHORT_WAIT = 2.0


def _reconnect_again(p: ConnectionPool) -> None:
    """psycopg_pool's `reconnect_failed` callback. Its attempts to reconnect back off by
    doubling delays: after a long outage it would wait tens of seconds more. So each series
    of attempts gives up after RECONNECT_DELAY (`reconnect_timeout`), and a new one starts at
    once: the pool tries again at most RECONNECT_DELAY apart however long the outage lasts."""
    if not p.closed:
        with suppress(Exception):  # (closed meanwhile)
            p.check()


def is_connection_error(exc: BaseException) -> bool:
    """A failure to reach or keep the database (server down or restarting, database dropped,
    connection lost, no pooled connection in time), as opposed to an error of a statement."""
    if isinstance(exc, PoolTimeout | DatabaseUnreachable):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate or ""
    # 08: connection exceptions; 57P01-03: admin/crash shutdown, cannot connect now;
    # 3D000: the database does not exist (dropped).
    return state == "" or state.startswith("08") or state.startswith("57P") or state == "3D000"


class Reachability:
    """Whether this process can reach the database. The first failure of an outage is logged
    (one line, its cause) and reported; its end is logged with its length; failures in between
    are silent."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.down_since: float | None = None

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def failed(self, exc: BaseException, what: str) -> None:
        with self._lock:
            if self.down_since is not None:
                return
            self.down_since = time.monotonic()
        log.warning(
            "database unreachable (%s): %s; trying again every %.1fs",
            what,
            first_line(exc),
            RECONNECT_DELAY,
        )
        from pgbus.reporting import call_reporters

        call_reporters(exc, {"action": what, "database": "unreachable"})

    def ok(self) -> None:
        if self.down_since is None:
            return
        with self._lock:
            since, self.down_since = self.down_since, None
        if since is None:
            return
        log.warning("database reachable again after %.1fs", time.monotonic() - since)
        with _pool_lock:
            current = _pool
        if current is not None:
            # Connections from before the outage are dead: replace them now, not on first use.
            threading.Thread(target=_check_pool, args=(current,), daemon=True).start()


def _check_pool(p: ConnectionPool) -> None:
    with suppress(Exception):  # (closed meanwhile)
        p.check()


reachability = Reachability()


def connect(
    dsn: str | None = None, *, autocommit: bool = True, timeout: int = 10, **kwargs: Any
) -> psycopg.Connection:
    """A new connection, or DatabaseUnreachable with libpq's one-line reason."""
    url = dsn or settings().dsn()
    try:
        return psycopg.connect(url, autocommit=autocommit, connect_timeout=timeout, **kwargs)
    except psycopg.OperationalError as exc:
        raise DatabaseUnreachable(
            f"cannot reach the database at {redact(url)}: {reason(exc)}"
        ) from exc


def check_reachable(dsn: str | None = None) -> None:
    """Fails fast, with the real cause on one line, when a process cannot start: a wrong
    URL, the server down, bad credentials, no such database (instead of a pool timing out
    after 30 seconds)."""
    with connect(dsn, timeout=CONNECT_TIMEOUT):
        pass


def pool() -> ConnectionPool:
    """The process's shared pool (created on first use; re-created after a fork)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            s = settings()
            quiet_pool_log()
            _pool = ConnectionPool(
                s.dsn(),
                min_size=1,
                max_size=s.pool_size,
                kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT},
                open=True,
                name="pgbus",
                # Never give up reconnecting (a process outlives any outage), and never wait
                # long between two attempts: see _reconnect_again.
                reconnect_timeout=RECONNECT_DELAY,
                reconnect_failed=_reconnect_again,
            )
        return _pool


def quiet_pool_log() -> None:
    """psycopg_pool logs a warning (two lines) for every failed attempt to reconnect; during an
    outage Reachability says it once instead. Left alone when the application set a level."""
    pool_log = logging.getLogger("psycopg.pool")
    if pool_log.level == logging.NOTSET:
        pool_log.setLevel(logging.ERROR)


def close_pool() -> None:
    global _pool
    with _pool_lock:
        if _pool is not None:
            _pool.close()
            _pool = None


def atomic(conn: psycopg.Connection) -> AbstractContextManager[Any]:
    """A block that commits or rolls back as one, without taking the commit from a caller.

    On an autocommit connection it is a transaction (a savepoint inside the caller's own); on a
    connection that manages its own transactions the block simply joins the open (or implicit)
    transaction, which the caller commits or rolls back.
    """
    in_transaction = conn.info.transaction_status != TransactionStatus.IDLE
    if conn.autocommit or in_transaction:
        return conn.transaction()
    return nullcontext()


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def reason(exc: BaseException) -> str:
    """libpq's reason for a failed connection, on one line: its first line without the
    "connection failed: connection to server at ... failed:" preamble when one follows."""
    line = first_line(exc).removeprefix("connection failed: ")
    return re.sub(r"^connection to server (at|on) .*? failed: (FATAL: +)?", "", line) or line


def redact(url: str) -> str:
    """host:port/dbname of a URL, with no credentials."""
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = f":{parts.port}" if parts.port else ""
    return f"{host}{port}{parts.path or '/'}"

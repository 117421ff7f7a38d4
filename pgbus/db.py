"""Connections: one-off ones for commands, a shared pool for processes."""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager, nullcontext
from typing import Any
from urllib.parse import urlsplit

import psycopg
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool

from pgbus.config import settings
from pgbus.errors import DatabaseUnreachable

_pool: ConnectionPool | None = None
_pool_lock = threading.Lock()


def connect(
    dsn: str | None = None, *, autocommit: bool = True, timeout: int = 10
) -> psycopg.Connection:
    """A new connection, or DatabaseUnreachable with libpq's one-line reason."""
    url = dsn or settings().dsn()
    try:
        return psycopg.connect(url, autocommit=autocommit, connect_timeout=timeout)
    except psycopg.OperationalError as exc:
        raise DatabaseUnreachable(
            f"cannot reach the database at {redact(url)}: {first_line(exc)}"
        ) from exc


def pool() -> ConnectionPool:
    """The process's shared pool (created on first use; re-created after a fork)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            s = settings()
            _pool = ConnectionPool(
                s.dsn(),
                min_size=1,
                max_size=s.pool_size,
                kwargs={"autocommit": True},
                open=True,
                name="pgbus",
            )
        return _pool


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


def redact(url: str) -> str:
    """host:port/dbname of a URL, with no credentials."""
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = f":{parts.port}" if parts.port else ""
    return f"{host}{port}{parts.path or '/'}"

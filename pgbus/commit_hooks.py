"""Run code after a transaction commits, and never after a rollback.

Instrumentation and error reports of a workflow transition must go out only once the
transition is durable, exactly once, and never for one that rolled back, whatever savepoints
lie between:

- on a connection outside any transaction (autocommit), the transition has committed already:
  the hook runs at once;
- inside a transaction (the caller's own, or a running job's, at any savepoint depth), the hook
  waits for a NOTIFY sent at the same depth as the transition. PostgreSQL delivers it to the
  session only when the whole transaction commits, and drops it with any savepoint or
  transaction that rolls back, so the hook runs exactly when its transition became durable.
  The LISTEN goes with every NOTIFY, at the same depth: a LISTEN rolled back with an earlier
  transaction or savepoint leaves no connection deaf.
"""

from __future__ import annotations

import itertools
import logging
import threading
import weakref
from collections.abc import Callable

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus

log = logging.getLogger("pgbus")
Hook = Callable[[], None]

_tokens = itertools.count(1)
_lock = threading.Lock()
# Per connection: the hooks waiting for their transaction's commit, by token (increasing).
_pending: weakref.WeakKeyDictionary[psycopg.Connection, dict[int, Hook]] = (
    weakref.WeakKeyDictionary()
)


def after_commit(conn: psycopg.Connection, hook: Hook) -> None:
    """Runs `hook` once the transition just made on `conn` has committed; never if it (or a
    savepoint around it) rolls back."""
    if conn.info.transaction_status == TransactionStatus.IDLE:
        run_hooks([hook])
    else:
        _defer(conn, hook)


def run_hooks(hooks: list[Hook]) -> None:
    for hook in hooks:
        try:
            hook()
        except Exception:
            log.exception("pgbus: an after-commit hook failed")


def _channel(conn: psycopg.Connection) -> str:
    return f"pgbus_after_commit_{conn.info.backend_pid}"


def _defer(conn: psycopg.Connection, hook: Hook) -> None:
    with _lock:
        waiting = _pending.get(conn)
        first = waiting is None
        if first:
            waiting = _pending[conn] = {}
        token = next(_tokens)
        waiting[token] = hook
    if first:
        conn.add_notify_handler(lambda n: _delivered(conn, n))
    channel = sql.Identifier(_channel(conn))
    conn.execute(
        sql.SQL("LISTEN {}; NOTIFY {}, {}").format(channel, channel, sql.Literal(str(token)))
    )


def _delivered(conn: psycopg.Connection, notify: psycopg.Notify) -> None:
    if notify.channel != _channel(conn):
        return
    token = int(notify.payload)
    with _lock:
        waiting = _pending.get(conn, {})
        hook = waiting.pop(token, None)
        # Notifications arrive in the order they were sent: a token older than this one that
        # is still waiting belonged to a savepoint or transaction that rolled back.
        for stale in [t for t in waiting if t < token]:
            del waiting[stale]
    if hook is not None:
        run_hooks([hook])

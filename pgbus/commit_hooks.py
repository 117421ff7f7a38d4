"""Run code after a transaction commits, and never after a rollback.

Instrumentation and error reports of a workflow transition must go out only once the
transition is durable. Three cases:

- the transition ran in a running job's transaction: the worker runs the hooks once that
  transaction committed (`JobTransaction.on_commit`);
- it ran on an autocommit connection outside a transaction: it has committed already, so the
  hook runs at once;
- it ran inside the caller's own open transaction: the hook waits for a NOTIFY that the
  transaction sends to its own session, which PostgreSQL delivers only when (and if) it
  commits. A rollback drops the notification, and with it the hook.
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
# Per connection: the hooks waiting for their transaction's commit, by token.
_pending: weakref.WeakKeyDictionary[psycopg.Connection, dict[str, list[Hook]]] = (
    weakref.WeakKeyDictionary()
)


def after_commit(conn: psycopg.Connection, hook: Hook) -> None:
    from pgbus.jobs import current_transaction

    running = current_transaction.get()
    if running is not None and running.begun and running.connection() is conn:
        running.on_commit(hook)
    elif conn.info.transaction_status == TransactionStatus.IDLE:
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
        token = str(next(_tokens))
        waiting[token] = [hook]
    if first:
        conn.add_notify_handler(lambda n: _delivered(conn, n))
        conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(_channel(conn))))
    conn.execute("SELECT pg_notify(%s, %s)", (_channel(conn), token))


def _delivered(conn: psycopg.Connection, notify: psycopg.Notify) -> None:
    if notify.channel != _channel(conn):
        return
    with _lock:
        hooks = _pending.get(conn, {}).pop(notify.payload, [])
    run_hooks(hooks)

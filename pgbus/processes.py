"""A process's row in pgbus.processes, kept fresh by a heartbeat thread."""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from typing import Any

from psycopg.types.json import Jsonb

from pgbus.config import settings
from pgbus.db import SHORT_WAIT, is_connection_error, pool, reachability
from pgbus.reporting import report_error

log = logging.getLogger("pgbus")
SUPERVISOR_ENV = "PGBUS_SUPERVISOR_PID"


def orphaned() -> bool:
    """True for a supervised child whose supervisor is gone (it should stop)."""
    expected = os.environ.get(SUPERVISOR_ENV)
    return bool(expected) and str(os.getppid()) != expected


def orphaned_reason() -> str:
    """Why a supervised child stops on its own, for its last log line."""
    return (
        f"its supervisor (pid {os.environ.get(SUPERVISOR_ENV)}) is gone:"
        " stopping (the next `pgbus start` runs a new one)"
    )


class ProcessRecord:
    """Registers on start, heartbeats with fresh metadata, deregisters on a clean stop.

    `metadata` is called for every beat; its answer is the process's row's metadata.
    """

    def __init__(
        self,
        kind: str,
        metadata: Callable[[], dict[str, Any]] = dict,
        interval: float | None = None,
    ) -> None:
        self.kind = kind
        self.metadata = metadata
        self.interval = interval or settings().heartbeat_interval.total_seconds()
        self.id: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def register(self) -> int:
        with pool().connection() as c:
            self.id = c.execute(
                "SELECT pgbus.process_register(kind => %(kind)s, hostname => %(hostname)s,"
                " pid => %(pid)s, app_revision => %(app_revision)s, metadata => %(metadata)s)",
                {
                    "kind": self.kind,
                    "hostname": socket.gethostname(),
                    "pid": os.getpid(),
                    "app_revision": settings().revision(),
                    "metadata": Jsonb(self.metadata()),
                },
            ).fetchone()[0]
        return self.id

    def beat(self) -> None:
        with pool().connection(timeout=SHORT_WAIT) as c:
            alive = c.execute(
                "SELECT pgbus.process_heartbeat(process_id => %s, metadata => %s)",
                (self.id, Jsonb(self.metadata())),
            ).fetchone()[0]
        if not alive:  # pruned while we were unreachable: come back
            self.register()

    def start(self) -> None:
        self.register()
        self._thread = threading.Thread(
            target=self._run, name=f"pgbus-{self.kind}-heartbeat", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.beat()
                reachability.ok()
            except Exception as exc:
                if is_connection_error(exc):
                    reachability.failed(exc, f"{self.kind} heartbeat")
                else:
                    report_error(exc, {"action": "heartbeat", "kind": self.kind})

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(SHORT_WAIT + 1)
        if self.id is not None:
            try:
                if reachability.down:
                    raise ConnectionError("the database is unreachable")
                with pool().connection(timeout=SHORT_WAIT) as c:
                    c.execute("SELECT pgbus.process_deregister(%s)", (self.id,))
            except Exception as exc:
                # (The dispatcher prunes the row once its heartbeat is stale.)
                log.warning("pgbus: could not deregister %s process: %s", self.kind, exc)

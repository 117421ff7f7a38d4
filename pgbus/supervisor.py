"""`pgbus start`: one child process per configured worker and event consumer plus one
dispatcher, restarted when they die, stopped together on SIGTERM.

Children are fresh interpreters (`python -m pgbus.cli worker ...`), not forks, so no thread,
lock or connection of the supervisor leaks into them.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from pgbus.config import settings
from pgbus.db import check_reachable
from pgbus.processes import SUPERVISOR_ENV, ProcessRecord
from pgbus.reporting import report_error

log = logging.getLogger("pgbus.supervisor")
STABLE_UPTIME = 30.0  # a child that ran this long restarts at once
MAX_BACKOFF = 60.0


@dataclasses.dataclass
class Child:
    name: str
    argv: list[str]
    popen: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    crashes: int = 0
    restart_at: float = 0.0


def scheduler_wanted() -> bool:
    """A scheduler runs when enabled and some task is declared. The declarations are checked
    here, so a bad one stops `pgbus start` at once with its key and the reason."""
    from pgbus.scheduler import declared_tasks

    if not settings().scheduler_enabled:
        return False
    recurring, deploy = declared_tasks()
    return bool(recurring or deploy)


class Supervisor:
    def __init__(
        self, imports: list[str], with_dispatcher: bool = True, with_scheduler: bool = True
    ) -> None:
        base = [sys.executable, "-m", "pgbus.cli"]
        imp = [a for m in imports for a in ("--import", m)]
        self.children = [
            Child(
                f"worker-{i}",
                [
                    *base,
                    "worker",
                    "--queues",
                    ",".join(w["queues"]),
                    "--threads",
                    str(w["threads"]),
                    *imp,
                ],
            )
            for i, w in enumerate(settings().workers)
        ]
        self.children += [
            Child(
                f"consumer-{i}",
                [
                    *base,
                    "consumer",
                    "--topics",
                    ",".join(c["topics"]),
                    "--threads",
                    str(c["threads"]),
                    *imp,
                ],
            )
            for i, c in enumerate(settings().event_consumers)
        ]
        if with_dispatcher:
            self.children.append(Child("dispatcher", [*base, "dispatcher", *imp]))
        if with_scheduler and scheduler_wanted():
            self.children.append(Child("scheduler", [*base, "scheduler", *imp]))
        self._stopping = threading.Event()
        self._signals = 0

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "PGBUS_DATABASE_URL": settings().dsn(),
            SUPERVISOR_ENV: str(os.getpid()),
        }

    def _spawn(self, child: Child) -> None:
        try:
            # Their own session: a terminal's Ctrl-C reaches only the supervisor, which forwards
            # it once (a second signal means "exit now" to a worker).
            child.popen = subprocess.Popen(child.argv, env=self._env(), start_new_session=True)
            child.started_at = time.monotonic()
            log.info("started %s (pid %d)", child.name, child.popen.pid)
        except OSError as exc:
            report_error(exc, {"action": f"spawn_{child.name}"})
            child.restart_at = time.monotonic() + MAX_BACKOFF

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self._signals += 1
        self._stopping.set()
        for child in self.children:
            if child.popen and child.popen.poll() is None:
                child.popen.send_signal(signum if self._signals == 1 else signal.SIGTERM)

    def _reap(self) -> None:
        now = time.monotonic()
        for child in self.children:
            if child.popen is None:
                if now >= child.restart_at:
                    self._spawn(child)
                continue
            code = child.popen.poll()
            if code is None:
                continue
            uptime = now - child.started_at
            child.crashes = 0 if code == 0 or uptime >= STABLE_UPTIME else child.crashes + 1
            delay = 0.0 if child.crashes == 0 else min(2 ** (child.crashes - 1), MAX_BACKOFF)
            log.warning(
                "%s exited with %s after %.0fs; restarting in %.0fs",
                child.name,
                code,
                uptime,
                delay,
            )
            child.popen, child.restart_at = None, now + delay

    def run(self) -> int:
        check_reachable()  # (fails fast, with its cause, on one line)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        record = ProcessRecord("supervisor", lambda: {"children": [c.name for c in self.children]})
        record.start()
        try:
            for child in self.children:
                self._spawn(child)
            while not self._stopping.wait(0.5):
                self._reap()
            return self._shutdown()
        finally:
            record.stop()

    def _shutdown(self) -> int:
        deadline = time.monotonic() + settings().drain_timeout.total_seconds() + 5
        running = [c.popen for c in self.children if c.popen is not None]
        for p in running:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("pid %d did not stop in time: killing it", p.pid)
                p.kill()
                p.wait()
        log.info("supervisor stopped")
        return 0

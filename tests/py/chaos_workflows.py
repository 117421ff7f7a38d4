"""Workflows for the chaos tests (`--import tests.py.chaos_workflows`): every step body writes
through the step's connection, so a step whose writes commit twice shows as two rows.

- `effects(kind, key)`: kind is the step, key the run's id; committed with the step's end.
- `body_starts(workflow_id, step, attempt)`: written on a separate connection of its own when a
  body starts (kept whatever happens to the step): which bodies really started. With the
  argument `starts_dir`, a file `<run>.<step>.<attempt>` there instead (quicker).
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from pathlib import Path

import psycopg

import pgbus
from pgbus.config import settings
from pgbus.workflow import on_exception, step

_side = threading.local()


def record_start(wf: pgbus.Workflow) -> None:
    """Commits at once, on a connection of this thread's own (not pgbus's)."""
    conn = getattr(_side, "conn", None)
    if conn is None or conn.closed:
        conn = _side.conn = psycopg.connect(settings().dsn(), autocommit=True)
    conn.execute(
        "INSERT INTO body_starts (workflow_id, step, attempt) VALUES (%s, %s, %s)",
        (str(wf.workflow_id), wf.step_name, wf.attempt),
    )


def _write(wf: pgbus.Workflow, name: str) -> None:
    if wf.arguments.get("starts_dir"):  # (a file: no connection to open, no delay)
        Path(wf.arguments["starts_dir"], f"{wf.workflow_id}.{wf.step_name}.{wf.attempt}").touch()
    if wf.arguments.get("record_starts"):
        record_start(wf)
    work = float(wf.arguments.get("work", 0))
    if work:
        time.sleep(work)
    wf.conn.execute("INSERT INTO effects (kind, key) VALUES (%s, %s)", (name, str(wf.workflow_id)))


class Chaos(pgbus.Workflow):
    """Three steps, each writing one row through the step's connection."""

    @step
    def one(self):
        _write(self, "one")

    @step
    def two(self):
        _write(self, "two")

    @step
    def three(self):
        _write(self, "three")


def _wait_for_file(path: Path, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)


class CrashAfterRead(pgbus.Workflow):
    """Its first step says it started (a file `started-<run>` in `folder`), waits for the file
    `go` (the test restarts the server meanwhile), and only then writes through the step's
    connection: a begin lost in the crash must not let that write commit."""

    @step
    def first(self):
        folder = Path(self.arguments["folder"])
        (folder / f"started-{self.workflow_id}-{time.monotonic_ns()}").touch()
        _wait_for_file(folder / "go")
        self.conn.execute(
            "INSERT INTO effects (kind, key) VALUES ('first', %s)", (str(self.workflow_id),)
        )

    @step
    def second(self):
        self.conn.execute(
            "INSERT INTO effects (kind, key) VALUES ('second', %s)", (str(self.workflow_id),)
        )


def _hang(wf: pgbus.Workflow) -> None:
    """Writes, then hangs (in Python with its transaction open, or in a statement) for
    `seconds`, then writes again."""
    wf.conn.execute(
        "INSERT INTO effects (kind, key) VALUES ('before_hang', %s)", (str(wf.workflow_id),)
    )
    Path(wf.arguments["folder"], f"hanging-{wf.workflow_id}").touch()
    if wf.arguments.get("in_sql"):
        wf.conn.execute("SELECT pg_sleep(%s)", (wf.arguments["seconds"],))
    else:
        time.sleep(wf.arguments["seconds"])
    wf.conn.execute(
        "INSERT INTO effects (kind, key) VALUES ('after_hang', %s)", (str(wf.workflow_id),)
    )


class Hung(pgbus.Workflow):
    """A step with a 2 s timeout that hangs longer (_hang)."""

    @step(timeout=timedelta(seconds=2))
    def hang(self):
        _hang(self)


class HungWithoutTimeout(pgbus.Workflow):
    """A step without a timeout that hangs (_hang) past the stall threshold."""

    @step
    def hang(self):
        _hang(self)


class EndFails(pgbus.Workflow):
    """Its step writes, then outputs {"boom": 1}, which a trigger of the test refuses when the
    step's end stores it: the end raises in SQL."""

    @step
    def explode(self):
        self.conn.execute(
            "INSERT INTO effects (kind, key) VALUES ('before_boom', %s)", (str(self.workflow_id),)
        )
        self.output(boom=1)


class WaitsForGo(pgbus.Workflow):
    """Its step says it started (a file `started-<run>` in `folder`), waits for the file `go`,
    then writes through the step's connection."""

    @step
    def long(self):
        folder = Path(self.arguments["folder"])
        (folder / f"started-{self.workflow_id}").touch()
        _wait_for_file(folder / "go")
        self.conn.execute(
            "INSERT INTO effects (kind, key) VALUES ('long', %s)", (str(self.workflow_id),)
        )


def _heard(wf: pgbus.Workflow, exc: BaseException) -> str:
    """An exception policy's handler that leaves a trace (on a connection of its own)."""
    with psycopg.connect(settings().dsn(), autocommit=True) as conn:
        conn.execute("INSERT INTO effects (kind, key) VALUES ('policy', %s)", (type(exc).__name__,))
    return "skip"


class LosesItsConnection(pgbus.Workflow):
    """On its first try the body writes, then its step connection's server process is ended
    under it (as a server restart would): pgbus's connection failed, not the body. Its
    exception policy for connection errors must never hear of it."""

    exception_policies = (on_exception(psycopg.OperationalError, handler=_heard),)

    @step
    def cut(self):
        self.conn.execute(
            "INSERT INTO effects (kind, key) VALUES ('cut', %s)", (str(self.workflow_id),)
        )
        folder = Path(self.arguments["folder"])
        if not (folder / "cut").exists():
            (folder / "cut").touch()
            self.conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")

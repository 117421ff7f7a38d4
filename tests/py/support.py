"""Helpers for tests: real subprocesses, waiting on conditions with a deadline."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def database_url(admin_url: str, name: str) -> str:
    return urlunsplit(urlsplit(admin_url)._replace(path="/" + name))


QUEUE_FUNCTIONS = ["queue_send", "queue_read", "queue_archive"]


def queue_statements_written(conn: Any, queue: str) -> list[str]:
    """The queue functions (of QUEUE_FUNCTIONS, in pgbus) whose body has `queue`'s statement
    written out."""
    return [
        fn
        for fn in QUEUE_FUNCTIONS
        if f"WHEN '{queue}' THEN"
        in conn.execute(
            "SELECT prosrc FROM pg_proc WHERE oid = %s::regproc", (f"pgbus.{fn}",)
        ).fetchone()[0]
    ]


def count_effects(conn: Any, kind: str, key: str | None = None) -> int:
    """Rows of the sample jobs' `effects` table of one kind (and key)."""
    if key is None:
        return conn.execute("SELECT count(*) FROM effects WHERE kind = %s", (kind,)).fetchone()[0]
    return conn.execute(
        "SELECT count(*) FROM effects WHERE kind = %s AND key = %s", (kind, key)
    ).fetchone()[0]


def statuses(url: str) -> dict[str, int]:
    """How many workflow runs are in each status."""
    with psycopg.connect(url) as c:
        return dict(
            c.execute("SELECT status, count(*) FROM pgbus.workflows GROUP BY status").fetchall()
        )


def settled(url: str, total: int) -> bool:
    """Whether all `total` runs have ended or paused (nothing more will move them alone)."""
    s = statuses(url)
    return s.get("finished", 0) + s.get("paused", 0) + s.get("cancelled", 0) == total


@contextmanager
def running_worker(queues: Sequence[str] = ("default",), threads: int = 2) -> Iterator[Any]:
    """A real Worker in this process, on a thread (fast); stopped and drained on exit."""
    from pgbus.worker import Worker

    w = Worker(list(queues), threads=threads)
    t = threading.Thread(target=w.run, daemon=True)
    t.start()
    try:
        yield w
    finally:
        w.stop()
        t.join(30)


def wait_until(
    predicate: Callable[[], T], timeout: float = 10.0, interval: float = 0.02, what: str = ""
) -> T:
    """The predicate's first truthy value; AssertionError when the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


def run_pgbus(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`pgbus ARGS` as a real process; returns its exit code and output."""
    return subprocess.run(
        [sys.executable, "-m", "pgbus.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        cwd=ROOT,
    )


class Process:
    """A real child process (a worker, the supervisor...) whose output goes to a file."""

    def __init__(self, argv: Sequence[str], env: dict[str, str] | None = None) -> None:
        self.log = Path(tempfile.mkstemp(prefix="pgbus-proc-", suffix=".log")[1])
        self._fh = self.log.open("w")
        self.popen = subprocess.Popen(
            list(argv),
            stdout=self._fh,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=ROOT,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def output(self) -> str:
        self._fh.flush()
        return self.log.read_text(errors="replace")

    def wait_for_output(self, text: str, timeout: float = 15.0) -> None:
        wait_until(
            lambda: text in self.output() or self.popen.poll() is not None, timeout, what=text
        )
        if text not in self.output():
            raise AssertionError(
                f"process exited ({self.popen.returncode}) before printing {text!r}:\n{self.output()}"
            )

    def signal(self, sig: int) -> None:
        if self.popen.poll() is None:
            os.kill(self.popen.pid, sig)

    def wait(self, timeout: float = 30.0) -> int:
        return self.popen.wait(timeout)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL of the whole process group if it lingers."""
        if self.popen.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(5)
        self._fh.close()


def pgbus_process(*args: str, env: dict[str, str] | None = None) -> Process:
    return Process([sys.executable, "-m", "pgbus.cli", *args], env=env)


# Settings that make worker subprocesses notice things quickly in tests.
FAST = {"PGBUS_POLLING_INTERVAL": "0.2", "PGBUS_HEARTBEAT_INTERVAL": "0.5"}


def worker_process(db_url: str, *extra: str, env: dict[str, str] | None = None) -> Process:
    """`pgbus worker` with the sample jobs and workflows, against `db_url`."""
    return pgbus_process(
        "worker",
        "--import",
        "tests.py.sample_jobs",
        "--import",
        "tests.py.sample_workflows",
        *extra,
        env={"PGBUS_DATABASE_URL": db_url, **FAST, **(env or {})},
    )


class PrivateServer:
    """A PostgreSQL cluster of the test's own (scripts/pg on a free port), migrated; a test can
    restart it without disturbing the shared server."""

    def __init__(self) -> None:
        import socket
        import uuid

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.state = Path(f"/tmp/pgbus-private-{uuid.uuid4().hex[:8]}")
        self.env = {**os.environ, "PGBUS_PG_DIR": str(self.state), "PGBUS_PG_PORT": str(port)}
        self.url = self._pg("start")

    def _pg(self, action: str) -> str:
        out = subprocess.run(
            [str(ROOT / "scripts/pg"), action],
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip().splitlines()[-1]

    def restart(self) -> None:
        self._pg("stop")
        self._pg("start")

    def remove(self) -> None:
        subprocess.run([str(ROOT / "scripts/pg"), "stop"], env=self.env, capture_output=True)
        subprocess.run(["rm", "-rf", str(self.state)], check=False)


@contextmanager
def private_server() -> Iterator[PrivateServer]:
    from pgbus import migrate

    server = PrivateServer()
    try:
        migrate.migrate(server.url)
        with psycopg.connect(server.url, autocommit=True) as c:
            c.execute(
                "CREATE TABLE effects (id bigserial PRIMARY KEY, kind text NOT NULL,"
                " key text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())"
            )
        yield server
    finally:
        server.remove()

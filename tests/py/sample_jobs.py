"""Jobs the tests enqueue and real worker processes run (`--import tests.py.sample_jobs`).

Effects go to the table `effects` (see the `effects` fixture): written on the job's own
connection they commit with the job's completion; `mark` writes on a separate connection, so
it survives a crash or a rollback.
"""

from __future__ import annotations

import time

import psycopg

import pgbus
from pgbus.config import settings


def mark(kind: str, key: str) -> None:
    with psycopg.connect(settings().dsn(), autocommit=True) as c:
        c.execute("INSERT INTO effects (kind, key) VALUES (%s, %s)", (kind, key))


class Record(pgbus.Job):
    """Records `key` in the job's transaction."""

    def perform(self, key: str) -> None:
        self.conn.execute("INSERT INTO effects (kind, key) VALUES ('done', %s)", (key,))


class SlowOnFirstRun(pgbus.Job):
    """Marks its start, then on its first delivery works for `seconds` before recording."""

    def perform(self, key: str, seconds: float = 30) -> None:
        mark("started", key)
        if self.read_ct == 1:
            self.conn.execute("SELECT pg_sleep(%s)", (seconds,))
        self.conn.execute("INSERT INTO effects (kind, key) VALUES ('done', %s)", (key,))


class Poison(pgbus.Job):
    max_retries = 2

    def perform(self, key: str) -> None:
        mark("attempt", key)
        raise ValueError(f"poison {key}")


class RecordCallback(pgbus.Job):
    """A batch callback: records which callback ran for which batch."""

    def perform(self, properties: dict) -> None:
        self.conn.execute(
            "INSERT INTO effects (kind, key) VALUES (%s, %s)",
            (properties.get("callback", "callback"), properties["name"]),
        )


class OnComplete(RecordCallback):
    def perform(self, properties: dict) -> None:
        super().perform({**properties, "callback": "on_complete"})


class OnSuccess(RecordCallback):
    def perform(self, properties: dict) -> None:
        super().perform({**properties, "callback": "on_success"})


class OnDiscard(RecordCallback):
    def perform(self, properties: dict) -> None:
        super().perform({**properties, "callback": "on_discard"})


@pgbus.job(queue="functions")
def record_function(key: str) -> None:
    mark("function", key)


class FinishedElsewhere(pgbus.Job):
    """Writes, then finds its message finished by 'another worker' (archived behind its back)."""

    def perform(self, key: str) -> None:
        self.conn.execute("INSERT INTO effects (kind, key) VALUES ('done', %s)", (key,))
        with psycopg.connect(settings().dsn(), autocommit=True) as other:
            other.execute("SELECT pgmq.archive('pgbus_default', %s::bigint)", (self.msg_id,))


class EnqueueThenFail(pgbus.Job):
    """Enqueues a follow-up from inside the job, then fails: the follow-up must not exist."""

    max_retries = 0

    def perform(self, key: str) -> None:
        Record.perform_later(f"child of {key}")
        raise RuntimeError("after enqueue")


class EnqueueChild(pgbus.Job):
    def perform(self, key: str) -> None:
        Record.perform_later(f"child of {key}")


class ArchivesItselfWithoutTransaction(pgbus.Job):
    """Never touches its own connection; its message is archived by 'another worker'."""

    def perform(self, key: str) -> None:
        with psycopg.connect(settings().dsn(), autocommit=True) as other:
            other.execute("SELECT pgmq.archive('pgbus_default', %s::bigint)", (self.msg_id,))


class Hang(pgbus.Job):
    """Marks its start, then hangs in Python for `seconds` (a step or job that never returns)."""

    def perform(self, key: str, seconds: float = 3600) -> None:
        mark("started", key)
        time.sleep(seconds)

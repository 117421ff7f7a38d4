"""Batches: jobs that finish together, with callbacks when they all did.

    with pgbus.batch(on_complete=Report, description="nightly import",
                     properties={"import_id": 7}) as b:
        for row in rows:
            b.add(ImportRow, row.id)

The block is one transaction (or joins the caller's, with `conn=`): the batch and its members
become visible together when it commits, and on rollback there is no batch, no member and no
callback.
`on_complete` runs when every member finished whatever the outcome, `on_success` when none was
dead-lettered, `on_discard` when at least one was; each receives the batch's properties.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

import psycopg
from psycopg.types.json import Jsonb

from pgbus.db import atomic
from pgbus.errors import PgbusError
from pgbus.jobs import Call, Job, JobOptions, connection
from pgbus.serialization import dump_arguments

Target = type[Job] | JobOptions


def _options(target: Target) -> JobOptions:
    return target if isinstance(target, JobOptions) else target.options()


def _callback(role: str, target: Target | None) -> Jsonb | None:
    if target is None:
        return None
    if not (
        isinstance(target, JobOptions) or (isinstance(target, type) and issubclass(target, Job))
    ):
        raise PgbusError(f"{role} must be a Job class or Job.set(...), got {target!r}")
    options = _options(target)
    return Jsonb({"job_class": options.job.job_name, "queue": options.physical_queue()})


@dataclasses.dataclass
class Batch:
    id: UUID
    conn: psycopg.Connection

    def add(self, target: Target, *args: Any, **kwargs: Any) -> int:
        """Enqueue one member; returns its message id."""
        return self.add_all([_options(target).call(*args, **kwargs)])[0]

    def add_all(self, calls: list[Call]) -> list[int]:
        """Enqueue several members, one statement per job class and options."""
        ids: list[int] = []
        groups: dict[JobOptions, list[Call]] = {}
        for c in calls:
            groups.setdefault(c.job, []).append(c)
        for options, group in groups.items():
            ids += options.enqueue(group, conn=self.conn, batch_id=self.id)
        return ids


@contextmanager
def batch(
    *,
    on_complete: Target | None = None,
    on_success: Target | None = None,
    on_discard: Target | None = None,
    description: str | None = None,
    properties: dict[str, Any] | None = None,
    conn: psycopg.Connection | None = None,
) -> Iterator[Batch]:
    callbacks = [
        _callback("on_complete", on_complete),
        _callback("on_success", on_success),
        _callback("on_discard", on_discard),
    ]
    props = Jsonb(dump_arguments((properties or {},), {})["args"][0])
    with connection(conn) as c, atomic(c):
        batch_id = c.execute(
            "SELECT pgbus.batch_open(description => %(description)s,"
            " properties => %(properties)s, on_complete => %(on_complete)s,"
            " on_success => %(on_success)s, on_discard => %(on_discard)s)",
            dict(
                zip(
                    ("description", "properties", "on_complete", "on_success", "on_discard"),
                    (description, props, *callbacks),
                    strict=True,
                )
            ),
        ).fetchone()[0]
        b = Batch(batch_id, c)
        yield b
        c.execute("SELECT pgbus.batch_close(%s)", (batch_id,))


def find(batch_id: UUID, conn: psycopg.Connection | None = None) -> dict[str, Any] | None:
    """The batch row as a dict, or None when there is no such batch (or it was cleaned up)."""
    with connection(conn) as c:
        cur = c.execute("SELECT * FROM pgbus.batches WHERE batch_id = %s", (batch_id,))
        row = cur.fetchone()
        return dict(zip([d.name for d in cur.description], row, strict=True)) if row else None

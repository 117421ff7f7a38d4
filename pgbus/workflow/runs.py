"""A handle on one run: what it is doing, its audit trail, and the outside verbs.

Every verb is `pgbus.workflow_command` under the run's row lock; a refusal raises
WorkflowRefused with the code and the status the run is in now, and changes nothing.
Instrumentation of a verb goes out after its transaction commits. What it reads comes from the
read layer (sql/views/020_workflow_read_layer.sql), the one path the dashboard and MCP share.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from pgbus.commit_hooks import after_commit
from pgbus.instrumentation import emit
from pgbus.jobs import connection
from pgbus.workflow.errors import WorkflowRefused, raise_named
from pgbus.workflow.payloads import encode_signal_payload

RUN_END_EVENTS = {
    "finished": "pgbus.workflow_finished",
    "cancelled": "pgbus.workflow_cancelled",
    "paused": "pgbus.workflow_paused",
}


def emit_status(
    workflow_class: str,
    workflow_id: UUID | str,
    status: str,
    actor: str | None = None,
    error_class: str | None = None,
) -> None:
    """Instrumentation for a run that just finished, was cancelled or paused."""
    event = RUN_END_EVENTS.get(status)
    if event is None:
        return
    fields: dict[str, Any] = {"workflow_class": workflow_class, "workflow_id": workflow_id}
    if status != "finished":
        fields |= {"actor": actor, "error_class": error_class}
    emit(event, **fields)


def emit_command(
    workflow_class: str,
    workflow_id: UUID | str,
    verb: str,
    params: Mapping[str, Any] | None,
    result: Mapping[str, Any],
    actor: str | None,
) -> None:
    """Instrumentation for an outside verb that was done (pgbus.workflow_command answered ok),
    emitted once its transaction has committed. The one place every writer (the Python API;
    the dashboard's buttons and bulk actions and the MCP write tools, both through
    pgbus.data.DataSource) turns a verb into events: a delivered signal is
    pgbus.workflow.signal; a pause, cancel, resume or skip that left the run paused, cancelled
    or finished is pgbus.workflow_paused / _cancelled / _finished. The other verbs (resume_at,
    run_now, reschedule, rerun) have no event of their own, as in the seed's catalog: the audit
    trail records them."""
    if not result.get("ok", True):
        return
    if verb == "signal":
        emit(
            "pgbus.workflow.signal",
            workflow_class=workflow_class,
            workflow_id=workflow_id,
            name=(params or {}).get("name"),
            signal_id=result["signal_id"],
            duplicate_delivery=result["duplicate_delivery"],
            woke=result["woke"],
            actor=actor,
        )
    elif verb in ("pause", "cancel", "resume", "skip"):
        emit_status(workflow_class, workflow_id, result["status"], actor)


@dataclasses.dataclass(frozen=True)
class Event:
    event: str
    actor: str | None
    reason: str | None
    details: dict[str, Any]
    step_id: int | None
    created_at: datetime


@dataclasses.dataclass(frozen=True)
class SignalDelivery:
    """What delivering a signal did: stored (or, its idempotency key seen before, nothing:
    duplicate_delivery), and whether it woke the step waiting for it."""

    signal_id: int
    duplicate_delivery: bool
    woke: bool
    status: str


@dataclasses.dataclass(frozen=True)
class WorkflowRun:
    workflow_id: UUID
    workflow_class: str
    duplicate_start: bool = False

    @classmethod
    def find(
        cls, workflow_id: UUID | str, conn: psycopg.Connection | None = None
    ) -> WorkflowRun | None:
        with connection(conn) as c:
            row = c.execute(
                "SELECT workflow_id, workflow_class FROM pgbus.workflow_runs_overview"
                " WHERE workflow_id = %s",
                (UUID(str(workflow_id)),),
            ).fetchone()
        return cls(row[0], row[1]) if row else None

    def row(self, conn: psycopg.Connection | None = None) -> dict[str, Any] | None:
        """The run's row (status, current_step, pause_cause, ...), or None once it is gone."""
        rows = self._rows("SELECT * FROM pgbus.workflow_runs_overview WHERE workflow_id = %s", conn)
        return rows[0] if rows else None

    def status(self, conn: psycopg.Connection | None = None) -> str | None:
        row = self.row(conn)
        return row["status"] if row else None

    def events(self, conn: psycopg.Connection | None = None) -> list[Event]:
        with connection(conn) as c:
            rows = c.execute(
                "SELECT event, actor, reason, details, step_id, created_at FROM pgbus.workflow_audit_trail"
                " WHERE workflow_id = %s ORDER BY event_id",
                (self.workflow_id,),
            ).fetchall()
        return [Event(*r) for r in rows]

    def steps(self, conn: psycopg.Connection | None = None) -> list[dict[str, Any]]:
        """Every attempt, oldest first."""
        return self._rows(
            "SELECT * FROM pgbus.workflow_attempts WHERE workflow_id = %s ORDER BY step_id", conn
        )

    def available_actions(self, conn: psycopg.Connection | None = None) -> list[str]:
        with connection(conn) as c:
            return c.execute(
                "SELECT pgbus.workflow_available_actions(%s)", (self.workflow_id,)
            ).fetchone()[0]

    # -- the outside verbs -------------------------------------------------------------------

    def pause(
        self,
        *,
        actor: str | None = None,
        reason: str | None = None,
        conn: psycopg.Connection | None = None,
    ) -> str:
        return self._command("pause", actor, reason, conn)

    def resume(
        self,
        *,
        actor: str | None = None,
        reason: str | None = None,
        conn: psycopg.Connection | None = None,
    ) -> str:
        """A failed step runs again; a completed one is followed by the next."""
        return self._command("resume", actor, reason, conn)

    def resume_at(
        self,
        step: str,
        *,
        actor: str | None = None,
        reason: str | None = None,
        conn: psycopg.Connection | None = None,
    ) -> str:
        return self._command("resume_at", actor, reason, conn, {"step": step})

    def cancel(
        self,
        *,
        actor: str | None = None,
        reason: str | None = None,
        conn: psycopg.Connection | None = None,
    ) -> str:
        return self._command("cancel", actor, reason, conn)

    def run_now(
        self,
        *,
        actor: str | None = None,
        reason: str | None = None,
        conn: psycopg.Connection | None = None,
    ) -> str:
        return self._command("run_now", actor, reason, conn)

    def reschedule(
        self,
        at: datetime,
        *,
        actor: str | None = None,
        reason: str | None = None,
        conn: psycopg.Connection | None = None,
    ) -> str:
        if at.tzinfo is None:
            raise ValueError("reschedule needs a timezone-aware time")
        return self._command("reschedule", actor, reason, conn, {"at": at.isoformat()})

    def skip(
        self,
        *,
        actor: str | None = None,
        reason: str | None = None,
        conn: psycopg.Connection | None = None,
    ) -> str:
        """Skips the step the waiting run waits on; the run goes on with the next."""
        return self._command("skip", actor, reason, conn)

    def signal(
        self,
        name: str,
        payload: Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        actor: str | None = None,
        reason: str | None = None,
        conn: psycopg.Connection | None = None,
    ) -> SignalDelivery:
        """Delivers signal `name` with `payload` (a JSON object, at most
        workflow_max_payload_size). A step waiting for it wakes; otherwise it waits as pending
        until a step takes it. With an `idempotency_key` seen before (a blank key is no key),
        nothing is stored and duplicate_delivery is True. Refused once the run ended."""
        if not isinstance(name, str):
            raise TypeError(f"a signal's name is a string, got {name!r}")
        stored = encode_signal_payload(payload)
        params = {"name": name, "payload": stored, "idempotency_key": idempotency_key}
        result = self._call("signal", actor, reason, conn, params)
        return SignalDelivery(
            result["signal_id"], result["duplicate_delivery"], result["woke"], result["status"]
        )

    def signals(self, conn: psycopg.Connection | None = None) -> list[dict[str, Any]]:
        """Every signal delivered to the run, oldest first."""
        return self._rows(
            "SELECT * FROM pgbus.workflow_signal_log WHERE workflow_id = %s ORDER BY signal_id",
            conn,
        )

    def _rows(self, query: str, conn: psycopg.Connection | None) -> list[dict[str, Any]]:
        """The rows of `query` (which takes this run's id) as dicts."""
        with connection(conn) as c:
            cursor = c.cursor(row_factory=dict_row)
            return cursor.execute(query, (self.workflow_id,)).fetchall()

    def rerun(
        self,
        *,
        actor: str | None = None,
        reason: str | None = None,
        conn: psycopg.Connection | None = None,
    ) -> WorkflowRun:
        """A new run of the same class, subject and arguments; linked to this one both ways."""
        result = self._call("rerun", actor, reason, conn, {})
        return WorkflowRun(UUID(result["workflow_id"]), self.workflow_class)

    def rerun_of(self, conn: psycopg.Connection | None = None) -> WorkflowRun | None:
        row = self.row(conn)
        return (
            WorkflowRun(row["rerun_of"], self.workflow_class) if row and row["rerun_of"] else None
        )

    def reruns(self, conn: psycopg.Connection | None = None) -> list[WorkflowRun]:
        with connection(conn) as c:
            rows = c.execute(
                "SELECT workflow_id FROM pgbus.workflow_runs_overview WHERE rerun_of = %s"
                " ORDER BY created_at",
                (self.workflow_id,),
            ).fetchall()
        return [WorkflowRun(r[0], self.workflow_class) for r in rows]

    def _command(
        self,
        verb: str,
        actor: str | None,
        reason: str | None,
        conn: psycopg.Connection | None,
        params: dict[str, Any] | None = None,
    ) -> str:
        return self._call(verb, actor, reason, conn, params or {})["status"]

    def _call(
        self,
        verb: str,
        actor: str | None,
        reason: str | None,
        conn: psycopg.Connection | None,
        params: dict[str, Any],
    ) -> dict[str, Any]:
        with connection(conn) as c:
            try:
                result = c.execute(
                    "SELECT pgbus.workflow_command(workflow_id => %(workflow_id)s,"
                    " verb => %(verb)s, actor => %(actor)s, reason => %(reason)s,"
                    " params => %(params)s)",
                    {
                        "workflow_id": self.workflow_id,
                        "verb": verb,
                        "actor": actor,
                        "reason": reason,
                        "params": Jsonb(params),
                    },
                ).fetchone()[0]
            except psycopg.Error as exc:
                raise_named(exc)
                raise
            if not result["ok"]:
                raise WorkflowRefused(
                    verb, result["code"], result.get("status"), result.get("message")
                )
            after_commit(
                c,
                lambda: emit_command(
                    self.workflow_class, self.workflow_id, verb, params, result, actor
                ),
            )
        return result

    def signal_delivered(
        self, conn: psycopg.Connection, name: str, result: dict[str, Any], actor: str | None
    ) -> None:
        """Instrumentation of a delivered signal, once its transaction commits."""
        after_commit(
            conn,
            lambda: emit_command(
                self.workflow_class, self.workflow_id, "signal", {"name": name}, result, actor
            ),
        )

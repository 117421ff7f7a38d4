"""`pgbus.Workflow`: the class a workflow subclasses, what its steps see while they run, and
starting runs.

Everything that decides a run's state is SQL (pgbus.workflow_start, _end_step, _command); this
class declares the steps and runs their bodies.
"""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, ClassVar
from uuid import UUID

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.types.json import Jsonb

from pgbus import queues
from pgbus.config import settings
from pgbus.db import atomic
from pgbus.errors import SchemaNotReady
from pgbus.jobs import connection
from pgbus.migrate import require_migration
from pgbus.workflow import subjects
from pgbus.workflow.definition import (
    ExceptionPolicy,
    RemovedStep,
    Signal,
    StepSpec,
    check_job_options,
    collect_steps,
    definition_payload,
)
from pgbus.workflow.errors import (
    AlreadyRunning,
    NoOngoingRun,
    UnknownWorkflow,
    WaitingStepsUnmigrated,
    WorkflowRefused,
    raise_named,
)
from pgbus.workflow.payloads import decode_payload, encode_payload, encode_signal_payload
from pgbus.workflow.runs import SignalDelivery, WorkflowRun

WORKFLOWS_MIGRATION = "0003_workflows"
WAITING_STEPS_MIGRATION = "0005_waiting_steps"
_registry: dict[str, type[Workflow]] = {}
_registered: set[tuple[str, str, str]] = set()  # (database, class, digest) this process wrote


class StepVerb(BaseException):
    """Raised by a verb inside a step; ends the attempt with that verb. A BaseException, so a
    step's `except Exception` does not swallow it."""

    def __init__(self, verb: str, wait: float | None = None, reason: str | None = None) -> None:
        super().__init__(verb)
        self.verb = verb
        self.wait = wait
        self.reason = reason


def workflow_class(name: str) -> type[Workflow]:
    try:
        return _registry[name]
    except KeyError:
        module = name.rpartition(".")[0]
        raise UnknownWorkflow(
            f"unknown workflow class {name!r}: import its module in the worker (pgbus start --import {module})"
        ) from None


class Workflow:
    """Subclass, declare steps with `@step`, start with `MyWorkflow.start(subject, **arguments)`."""

    workflow_name: ClassVar[str]
    step_job_options: ClassVar[dict[str, Any]] = {}
    exception_policies: ClassVar[Sequence[ExceptionPolicy]] = ()
    steps: ClassVar[list[StepSpec | RemovedStep]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        check_job_options(cls.__dict__.get("step_job_options"), "step_job_options")
        cls.workflow_name = (
            cls.__dict__.get("workflow_name") or f"{cls.__module__}.{cls.__qualname__}"
        )
        cls.steps = collect_steps(cls)
        _registry[cls.workflow_name] = cls

    # -- declaring hooks (override) ----------------------------------------------------------

    def cancel_if(self) -> bool:
        """Checked before every step; True cancels the run."""
        return False

    def before_step(self) -> None:
        """Runs before every step's body."""

    def after_step(self) -> None:
        """Runs after every step's body that did not raise."""

    # -- registering and starting ------------------------------------------------------------

    @classmethod
    def set_step_job_options(cls, **options: Any) -> None:
        """Every step's job options (queue, priority, wait), as `step_job_options = {...}`
        sets them; a step's own `job_options` wins."""
        cls.step_job_options = check_job_options(options, "step_job_options")

    @classmethod
    def step_spec(cls, name: str) -> StepSpec | RemovedStep | None:
        return next((s for s in cls.steps if s.name == name), None)

    @classmethod
    def queue(cls) -> str:
        """The PGMQ queue of this workflow's steps (step_job_options, else workflow_queue)."""
        options = cls.step_job_options or {}
        return queues.physical(
            options.get("queue") or settings().workflow_queue, options.get("priority")
        )

    @classmethod
    def register(cls, conn: psycopg.Connection) -> None:
        """Writes this class's definition to the database (once per process and digest)."""
        steps, digest = definition_payload(cls, cls.steps)
        key = (conn.info.dsn, cls.workflow_name, digest)
        if key in _registered:
            return
        require_migration(conn, WORKFLOWS_MIGRATION)
        if any(isinstance(s, StepSpec) and s.waits for s in cls.steps):
            try:
                require_migration(conn, WAITING_STEPS_MIGRATION)
            except SchemaNotReady:
                raise WaitingStepsUnmigrated(WAITING_STEPS_MIGRATION) from None
        conn.execute(
            "SELECT pgbus.workflow_register(workflow_class => %(workflow_class)s,"
            " steps => %(steps)s, digest => %(digest)s, queue => %(queue)s,"
            " removed_steps => %(removed_steps)s)",
            {
                "workflow_class": cls.workflow_name,
                "steps": Jsonb(steps),
                "digest": digest,
                "queue": cls.queue(),
                "removed_steps": [s.name for s in cls.steps if isinstance(s, RemovedStep)],
            },
        )
        if conn.info.transaction_status == TransactionStatus.IDLE:  # committed: remember it
            _registered.add(key)

    @classmethod
    def start(
        cls,
        subject: Any = None,
        /,
        *,
        idempotency_key: str | None = None,
        conn: psycopg.Connection | None = None,
        actor: str | None = None,
        **arguments: Any,
    ) -> WorkflowRun:
        """Starts a run. With `conn=` it joins your transaction: nothing runs unless it commits.
        Raises AlreadyRunning when the subject has an ongoing run of this class; with an
        `idempotency_key` used before, returns that run with `duplicate_start` True."""
        subject_key = subjects.identify(subject)
        stored = encode_payload(arguments, "the workflow's arguments")
        with connection(conn) as c:
            cls.register(c)
            try:
                with atomic(c):
                    workflow_id, duplicate = c.execute(
                        "SELECT * FROM pgbus.workflow_start(workflow_class => %(workflow_class)s,"
                        " subject_type => %(subject_type)s, subject_id => %(subject_id)s,"
                        " arguments => %(arguments)s, idempotency_key => %(idempotency_key)s,"
                        " actor => %(actor)s)",
                        {
                            "workflow_class": cls.workflow_name,
                            "subject_type": subject_key[0] if subject_key else None,
                            "subject_id": subject_key[1] if subject_key else None,
                            "arguments": Jsonb(stored),
                            "idempotency_key": idempotency_key,
                            "actor": actor,
                        },
                    ).fetchone()
            except psycopg.Error as exc:
                if exc.sqlstate == "PB409":
                    raise AlreadyRunning(cls.workflow_name, subject_key or ("", "")) from None
                raise_named(exc)
                raise
        return WorkflowRun(workflow_id, cls.workflow_name, duplicate_start=duplicate)

    @classmethod
    def signal(
        cls,
        subject: Any,
        name: str,
        payload: Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        actor: str | None = None,
        reason: str | None = None,
        missing: str = "raise",
        conn: psycopg.Connection | None = None,
    ) -> SignalDelivery | None:
        """Delivers a signal to the subject's ongoing run of this class. With none, raises
        NoOngoingRun (`missing="raise"`) or returns None (`missing="ignore"`)."""
        if missing not in ("raise", "ignore"):
            raise ValueError(f"missing is 'raise' or 'ignore', got {missing!r}")
        subject_type, subject_id = subjects.identify(subject) or (None, None)
        if subject_id is None:
            raise ValueError(
                "signal by subject needs a subject; use run.signal for subject-less runs"
            )
        if not isinstance(name, str):
            raise TypeError(f"a signal's name is a string, got {name!r}")
        stored = encode_signal_payload(payload)
        with connection(conn) as c:
            try:
                result = c.execute(
                    "SELECT pgbus.workflow_signal_subject(workflow_class => %(workflow_class)s,"
                    " subject_type => %(subject_type)s, subject_id => %(subject_id)s,"
                    " name => %(name)s, payload => %(payload)s,"
                    " idempotency_key => %(idempotency_key)s, actor => %(actor)s,"
                    " reason => %(reason)s)",
                    {
                        "workflow_class": cls.workflow_name,
                        "subject_type": subject_type,
                        "subject_id": subject_id,
                        "name": name,
                        "payload": Jsonb(stored),
                        "idempotency_key": idempotency_key,
                        "actor": actor,
                        "reason": reason,
                    },
                ).fetchone()[0]
            except psycopg.Error as exc:
                raise_named(exc)
                raise
            if result.get("code") == "no_ongoing_run":
                if missing == "ignore":
                    return None
                raise NoOngoingRun(result["message"])
            if not result["ok"]:
                raise WorkflowRefused(
                    "signal", result["code"], result.get("status"), result.get("message")
                )
            run = WorkflowRun(UUID(str(result["workflow_id"])), cls.workflow_name)
            run.signal_delivered(c, name, result, actor)
            return SignalDelivery(
                result["signal_id"], result["duplicate_delivery"], result["woke"], result["status"]
            )

    @classmethod
    def find(
        cls, workflow_id: UUID | str, conn: psycopg.Connection | None = None
    ) -> WorkflowRun | None:
        return WorkflowRun.find(workflow_id, conn=conn)

    # -- what a running step sees ------------------------------------------------------------

    workflow_id: UUID
    step_name: str
    attempt: int

    def _begin(self, context: dict[str, Any], transaction: Any) -> None:
        self.workflow_id = UUID(str(context["workflow_id"]))
        self.step_name = context["step_name"]
        self.attempt = int(context["attempt"])
        self.definition_outdated = bool(context.get("definition_outdated"))
        self._context = context
        self._transaction = transaction
        self._arguments = types.MappingProxyType(decode_payload(context.get("arguments")))
        self._outputs: dict[str, Any] = {}
        self._subject_loaded = False
        self._subject: Any = None
        self.received_signal: Signal | None = None
        self.timed_out = bool(context.get("timed_out"))

    @property
    def arguments(self) -> Mapping[str, Any]:
        """The run's arguments, read-only."""
        return self._arguments

    @property
    def subject(self) -> Any:
        """The run's subject, loaded through its registered loader; None once it is gone."""
        if not self._subject_loaded:
            self._subject = subjects.load(
                self._context.get("subject_type"), self._context.get("subject_id")
            )
            self._subject_loaded = True
        return self._subject

    @property
    def conn(self) -> psycopg.Connection:
        """The step's connection: its writes commit together with the step's end."""
        return self._transaction.connection()

    @property
    def step_idempotency_key(self) -> str:
        """The same on every attempt of this step of this run (for an external API)."""
        return f"{self.workflow_id}:{self.step_name}"

    @property
    def attempt_idempotency_key(self) -> str:
        return f"{self.workflow_id}:{self.step_name}:{self.attempt}"

    def output(self, **values: Any) -> None:
        """Values later steps read with output_of(); durable once this step completes."""
        self._outputs.update(values)

    def output_of(self, step_name: str) -> dict[str, Any] | None:
        """The output of the latest completed attempt of `step_name`, or None."""
        row = self.conn.execute(
            "SELECT output FROM pgbus.workflow_attempts WHERE workflow_id = %s AND step_name = %s"
            " AND status = 'completed' ORDER BY step_id DESC LIMIT 1",
            (self.workflow_id, step_name),
        ).fetchone()
        return decode_payload(row[0]) if row else None

    # The verbs: each ends the step now.

    def pause(self, reason: str | None = None) -> None:
        raise StepVerb("pause", reason=reason)

    def cancel(self, reason: str | None = None) -> None:
        raise StepVerb("cancel", reason=reason)

    def reattempt(self, wait: timedelta | float | None = None, reason: str | None = None) -> None:
        seconds = wait.total_seconds() if isinstance(wait, timedelta) else wait
        raise StepVerb("reattempt", wait=seconds, reason=reason)

    def skip(self, reason: str | None = None) -> None:
        raise StepVerb("skip", reason=reason)

    def finished(self, reason: str | None = None) -> None:
        raise StepVerb("finished", reason=reason)

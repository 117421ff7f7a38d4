"""The errors of workflows, each named for what went wrong."""

from __future__ import annotations

from pgbus.errors import PgbusError, SchemaNotReady


class AlreadyRunning(PgbusError):
    """The (class, subject) already has an ongoing run."""

    def __init__(self, workflow_class: str, subject: tuple[str, str]) -> None:
        self.workflow_class = workflow_class
        self.subject = subject
        super().__init__(
            f"{workflow_class} already has an ongoing run for {subject[0]} {subject[1]}"
        )


class WorkflowRefused(PgbusError):
    """An action the run's state does not allow (or a run that is gone): nothing changed."""

    def __init__(
        self, action: str, code: str, status: str | None, message: str | None = None
    ) -> None:
        self.action = action
        self.code = code
        self.status = status
        detail = message or (f"the run is {status}" if status else "there is no such run")
        super().__init__(f"cannot {action}: {code} ({detail})")


class PayloadTooLarge(PgbusError):
    """Arguments, an output or a signal's payload bigger than `workflow_max_payload_size`
    (SQLSTATE PB413 from SQL)."""


class WorkflowNotRegistered(PgbusError):
    """workflow_start named a class with no registered definition (SQLSTATE PB404)."""


class InvalidSignalPayload(PgbusError, TypeError):
    """A signal payload that is not a mapping (a dict or another Mapping, or None for {})."""


class StepNotDefined(PgbusError):
    """A run names a step its workflow class does not have (recorded on the attempt, by SQL
    when the step is not in the registered definition, by the runner when the code lacks it)."""


class InvalidPolicyDecision(PgbusError):
    """An exception policy's handler returned something other than a verb (pause, reattempt,
    cancel, skip) or (verb, wait): the run paused, and this is recorded and reported."""


class UnknownWorkflow(PgbusError):
    """A step of a workflow class this process has not imported."""


class SubjectNotRegistered(PgbusError):
    """A subject whose type has no loader (pgbus.workflow.register_subject)."""


class StepBeginFailed(PgbusError):
    """The database could not begin a step attempt; its StepJob fails and is retried."""


class NoOngoingRun(PgbusError):
    """A signal by subject found no ongoing run of the class for it (missing="raise")."""


class WaitingStepsUnmigrated(SchemaNotReady):
    """A workflow with waiting steps (signal gates, fan-outs) on a database without the
    waiting-steps migration: run `pgbus db migrate`."""


# Recorded on a step attempt by SQL (error_class "pgbus.workflow.<name>"), never raised: named
# here so that code reading attempts can refer to them.


class FanOutFailed(PgbusError):
    """A fan-out's batch finished with dead-lettered members ("1 of 3 jobs dead-lettered")."""


class FanOutBatchGone(PgbusError):
    """A fan-out's batch row is gone: its outcome is unknown, so the run paused."""


class WaitTimedOut(PgbusError):
    """A waiting step waited longer than its wait_timeout (on_timeout "pause")."""


def raise_named(exc: BaseException) -> None:
    """Re-raises a database error that has a pgbus name as that error (PB413, PB404); returns
    for any other, which the caller re-raises as it is."""
    sqlstate = getattr(exc, "sqlstate", None)
    message = str(getattr(getattr(exc, "diag", None), "message_primary", None) or exc)
    message = message.removeprefix("pgbus: ")
    if sqlstate == "PB413":
        raise PayloadTooLarge(message) from None
    if sqlstate == "PB404":
        raise WorkflowNotRegistered(message) from None

"""Every error pgbus raises on purpose, each named for what went wrong."""

from __future__ import annotations

from typing import ClassVar

# Where each module's errors are importable from: an error is recorded (on a step attempt, a
# job failure, in metrics) under that one name, whoever records it, SQL or Python.
PUBLIC_MODULES = {
    "pgbus.errors": "pgbus",
    "pgbus.jobs": "pgbus",
    "pgbus.queues": "pgbus",
    "pgbus.serialization": "pgbus",
    "pgbus.workflow.errors": "pgbus.workflow",
}


class PgbusError(Exception):
    """Base of every error pgbus raises on purpose. `error_name` is the one name it is
    recorded under, and where it can be imported from (`pgbus.workflow.StepNotDefined`)."""

    error_name: ClassVar[str] = "pgbus.PgbusError"

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "error_name" not in cls.__dict__:
            module = PUBLIC_MODULES.get(cls.__module__, cls.__module__)
            cls.error_name = f"{module}.{cls.__qualname__}"


class ConfigurationError(PgbusError):
    """A setting has a wrong type or value."""

    def __init__(self, setting: str, reason: str) -> None:
        self.setting = setting
        self.reason = reason
        super().__init__(f"pgbus setting {setting!r} {reason}")


class DatabaseUnreachable(PgbusError):
    """The database cannot be reached (wrong URL, server down, bad credentials)."""


class SchemaNotReady(PgbusError):
    """The database lacks a pgbus migration that the call needs: run `pgbus db migrate`."""

    def __init__(self, needed: str) -> None:
        self.needed = needed
        super().__init__(
            f"the database is missing the pgbus migration {needed!r}: run `pgbus db migrate`"
        )


# Recorded by SQL or by the worker, never raised: named here so that code reading attempts,
# failures and metrics can refer to them.


class StepStalled(PgbusError):
    """A step attempt whose worker died while it ran (its message came back), or that ran
    past its timeout or the stall threshold; the stall action then applied."""


class RetriesExhausted(PgbusError):
    """A job message delivered more often than it may run without ever finishing (its worker
    died each time): dead-lettered unrun."""


class SweepRepairFailed(PgbusError):
    """A repair of the workflow sweep raised for one run: that run is as it was (a
    repair_failed event on it says why), the other runs were repaired."""

"""Every error pgbus raises on purpose, each named for what went wrong."""

from __future__ import annotations


class PgbusError(Exception):
    """Base of every error pgbus raises on purpose."""


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

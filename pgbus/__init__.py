"""pgbus: durable workflows and a job queue inside PostgreSQL, on PGMQ."""

from pgbus.config import Settings, configure, settings
from pgbus.errors import ConfigurationError, DatabaseUnreachable, PgbusError, SchemaNotReady

__version__ = "0.1.0"

__all__ = [
    "ConfigurationError",
    "DatabaseUnreachable",
    "PgbusError",
    "SchemaNotReady",
    "Settings",
    "configure",
    "settings",
]

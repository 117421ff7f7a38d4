"""What an MCP answer may show: payloads are blanked, whole subtrees at a time, unless both
gates are open (the server allows payloads and the call asks for them)."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from collections.abc import Mapping
from typing import Any

REDACTED = "[redacted]"

# Keys whose values are user data or error text: message bodies, headers, job and workflow
# arguments, step outputs, signal payloads, errors and their messages, backtraces and causes. The
# value under such a key is replaced whole, whatever it holds (a nested value never leaks).
PAYLOAD_KEYS = frozenset(
    {
        "message",
        "headers",
        "payload",
        "arguments",
        "args",
        "kwargs",
        "output",
        "error",
        "error_message",
        "current_error_message",
        "backtrace",
        "causes",
        "newest_error",
    }
)


def jsonable(value: Any) -> Any:
    """A copy with only JSON types (times as ISO 8601 text, intervals as seconds)."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def redact(value: Any) -> Any:
    """A JSON-safe copy with every payload key's value replaced by "[redacted]" (None stays
    None: there is nothing to hide)."""
    if isinstance(value, Mapping):
        return {
            str(k): (REDACTED if v is not None else None) if str(k) in PAYLOAD_KEYS else redact(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    return jsonable(value)


def shown(value: Any, *, allowed: bool, requested: bool) -> Any:
    return jsonable(value) if allowed and requested else redact(value)

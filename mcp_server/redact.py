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

# Leaves that are JSON already, checked by exact type first: an answer is mostly these, and an
# exact-type look-up is much cheaper than isinstance against the abstract Mapping.
_JSON_LEAVES = frozenset({str, int, float, bool, type(None)})


def _leaf(value: Any) -> Any:
    """A JSON value for one leaf (times as ISO 8601 text, intervals as seconds)."""
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def jsonable(value: Any) -> Any:
    """A copy with only JSON types (times as ISO 8601 text, intervals as seconds)."""
    kind = type(value)
    if kind in _JSON_LEAVES:
        return value
    if kind is dict or isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if kind is list or isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return _leaf(value)


def redact(value: Any) -> Any:
    """A JSON-safe copy with every payload key's value replaced by "[redacted]" (None stays
    None: there is nothing to hide)."""
    kind = type(value)
    if kind in _JSON_LEAVES:
        return value
    if kind is dict or isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            key = k if type(k) is str else str(k)
            if key in PAYLOAD_KEYS:
                out[key] = REDACTED if v is not None else None
            else:
                out[key] = v if type(v) in _JSON_LEAVES else redact(v)
        return out
    if kind is list or isinstance(value, list | tuple):
        return [v if type(v) in _JSON_LEAVES else redact(v) for v in value]
    return _leaf(value)


def shown(value: Any, *, allowed: bool, requested: bool) -> Any:
    return jsonable(value) if allowed and requested else redact(value)

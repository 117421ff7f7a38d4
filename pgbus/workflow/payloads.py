"""Arguments, outputs and signal payloads as stored JSON (tagged like job arguments), capped at
workflow_max_payload_size.

SQL enforces the limit for every caller (pgbus.settings; PB413 when broken). Python checks it
too before it writes, so that a step whose output is too large pauses its run with
PayloadTooLarge instead of failing its end: it reads the database's limit (cached for a minute
per database) and applies the `workflow_max_payload_size` setting when that is lower.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from typing import Any

from pgbus.config import settings
from pgbus.serialization import dump_arguments, load_arguments
from pgbus.workflow.errors import InvalidSignalPayload, PayloadTooLarge

SMALLEST_LIMIT = 256  # no limit is lower: a payload this small needs no look-up
CACHE_SECONDS = 60.0
_cache: dict[str, tuple[int, float]] = {}
_cache_lock = threading.Lock()


def database_limit() -> int:
    """The database's workflow_max_payload_size (pgbus.settings), cached for a minute."""
    from pgbus.db import pool  # (pool() is created on first use)

    dsn = settings().dsn()
    now = time.monotonic()
    with _cache_lock:
        cached = _cache.get(dsn)
    if cached is not None and cached[1] > now:
        return cached[0]
    with pool().connection() as conn:
        limit = conn.execute("SELECT pgbus.workflow_max_payload_size()").fetchone()[0]
    with _cache_lock:
        _cache[dsn] = (limit, now + CACHE_SECONDS)
    return limit


def forget_database_limit() -> None:
    """Read the database's limit again on the next check (after changing it)."""
    with _cache_lock:
        _cache.clear()


def encode_payload(
    values: Mapping[str, Any], what: str, read_database_limit: bool = True
) -> dict[str, Any]:
    """Values as stored JSON, refused when larger than workflow_max_payload_size: this
    process's setting, and the database's as this process's settings reach it unless
    `read_database_limit` is false (a caller on a database of its own, which refuses an
    oversized payload itself when it is stored: PB413)."""
    encoded = dump_arguments((), dict(values))["kwargs"]
    size = len(json.dumps(encoded).encode())
    if size < SMALLEST_LIMIT:
        return encoded
    configured = settings().workflow_max_payload_size
    if configured is not None and size > configured:
        limit = configured
    elif not read_database_limit:
        return encoded
    else:
        limit = database_limit()
        if configured is not None:
            limit = min(limit, configured)
    if size > limit:
        raise PayloadTooLarge(
            f"{what}: {size} bytes, more than workflow_max_payload_size ({limit})"
        )
    return encoded


def decode_payload(stored: dict[str, Any] | None) -> dict[str, Any]:
    return load_arguments({"kwargs": stored or {}})[1]


def encode_signal_payload(
    payload: Mapping[str, Any] | None, read_database_limit: bool = True
) -> dict[str, Any]:
    """A signal's payload as stored: a mapping (None is {}); anything else, `[]` included, is
    refused with InvalidSignalPayload."""
    if payload is None:
        payload = {}
    elif not isinstance(payload, Mapping):
        raise InvalidSignalPayload(
            f"a signal's payload is a mapping (or None), got {type(payload).__name__}"
        )
    return encode_payload(payload, "the signal's payload", read_database_limit)

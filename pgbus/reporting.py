"""Errors pgbus catches (a failed job, a crashed loop) go to the log and to `error_reporters`.

pgbus.configure(error_reporters=[lambda exc, context: sentry_sdk.capture_exception(exc)])
"""

from __future__ import annotations

import logging
import os
import socket
import sysconfig
import traceback
from contextlib import suppress
from pathlib import Path
from typing import Any

from pgbus.config import settings
from pgbus.errors import PgbusError

log = logging.getLogger("pgbus")

# Frames from these are left out of a step's backtrace: pgbus itself, installed packages and the
# standard library; what stays is the application's own code.
_LIBRARY_DIRS = (
    str(Path(__file__).resolve().parent),
    *{str(Path(sysconfig.get_paths()[k]).resolve()) for k in ("purelib", "platlib", "stdlib")},
)


def error_record(exc: BaseException, backtrace_lines: int) -> dict[str, Any]:
    """Class, message, the backtrace of the application's own frames (capped), the cause
    chain, where it ran."""

    def name(e: BaseException) -> str:
        cls = type(e)
        if isinstance(e, PgbusError):
            return cls.error_name  # its one public name (pgbus.workflow.StepNotDefined)
        return (
            cls.__qualname__
            if cls.__module__ == "builtins"
            else f"{cls.__module__}.{cls.__qualname__}"
        )

    frames = traceback.extract_tb(exc.__traceback__)
    own = [
        f for f in frames if not f.filename.startswith(_LIBRARY_DIRS) and f.filename.endswith(".py")
    ]
    lines = (
        [f"{f.filename}:{f.lineno} in {f.name}" for f in own or frames][-backtrace_lines:]
        if backtrace_lines
        else []
    )
    causes, seen, cause = [], {id(exc)}, exc.__cause__ or exc.__context__
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        causes.append({"class": name(cause), "message": str(cause)[:2000]})
        cause = cause.__cause__ or cause.__context__
    return {
        "class": name(exc),
        "message": str(exc)[:4000],
        "backtrace": lines,
        "causes": causes,
        "worker": f"{socket.gethostname()}:{os.getpid()}",
        "app_revision": settings().revision(),
    }


def report_error(exc: BaseException, context: dict[str, Any] | None = None) -> None:
    """Log `exc` and hand it to every configured reporter as `(exc, context)`.

    Never raises: it runs on error paths, where a second failure would hide the first.
    Each reporter gets its own copy of the context, so none can change what the next one sees.
    """
    ctx: dict[str, Any] = {}
    with suppress(Exception):
        ctx = dict(context or {})
        from pgbus.db import first_line, is_connection_error

        if is_connection_error(exc):
            # A lost or refused connection says all on one line; its traceback would only show
            # the statement that happened to run when the server went away.
            log.error("[pgbus] %s: %s (%s)", type(exc).__name__, first_line(exc), ctx)
        else:
            log.error("[pgbus] %s: %s (%s)", type(exc).__name__, exc, ctx, exc_info=exc)
    call_reporters(exc, ctx)


def call_reporters(exc: BaseException, context: dict[str, Any] | None = None) -> None:
    """Hands `exc` to every configured reporter (no log line); never raises."""
    ctx: dict[str, Any] = {}
    with suppress(Exception):
        ctx = dict(context or {})
    for reporter in settings().error_reporters:
        try:
            reporter(exc, dict(ctx))
        except Exception:
            with suppress(Exception):
                log.warning("[pgbus] error reporter %r failed", reporter, exc_info=True)

"""Errors pgbus catches (a failed job, a crashed loop) go to the log and to `error_reporters`.

pgbus.configure(error_reporters=[lambda exc, context: sentry_sdk.capture_exception(exc)])
"""

from __future__ import annotations

import logging
from contextlib import suppress
from typing import Any

from pgbus.config import settings

log = logging.getLogger("pgbus")


def report_error(exc: BaseException, context: dict[str, Any] | None = None) -> None:
    """Log `exc` and hand it to every configured reporter as `(exc, context)`.

    Never raises: it runs on error paths, where a second failure would hide the first.
    Each reporter gets its own copy of the context, so none can change what the next one sees.
    """
    ctx: dict[str, Any] = {}
    with suppress(Exception):
        ctx = dict(context or {})
        log.error("[pgbus] %s: %s (%s)", type(exc).__name__, exc, ctx, exc_info=exc)
    for reporter in settings().error_reporters:
        try:
            reporter(exc, dict(ctx))
        except Exception:
            with suppress(Exception):
                log.warning("[pgbus] error reporter %r failed", reporter, exc_info=True)

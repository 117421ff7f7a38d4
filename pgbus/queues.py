"""Queue names: the name an app uses ("mail") and the PGMQ queue behind it ("pgbus_mail").

Names are normalised (lowercase; '-', '.', ':' and spaces become '_'; other characters are
dropped; runs of '_' collapse) and must leave room for the '_p<N>' priority and '_dlq' suffixes
within PGMQ's 47 characters.
"""

from __future__ import annotations

import re

from pgbus.config import settings
from pgbus.errors import PgbusError

PGMQ_MAX_NAME = 47
DLQ_SUFFIX = "_dlq"  # (SQL names a queue's dead letter queue <queue>_dlq)
# Room for the longest suffixes: "_p9" then "_dlq".
MAX_PHYSICAL_NAME = PGMQ_MAX_NAME - len("_p9") - len(DLQ_SUFFIX)


class InvalidQueueName(PgbusError):
    """A queue name that is empty after normalisation, or too long."""


def normalize(name: str) -> str:
    if not isinstance(name, str):
        raise InvalidQueueName(f"a queue name must be a string, got {name!r}")
    text = re.sub(r"[-.:\s]", "_", name.strip().lower())
    text = re.sub(r"_+", "_", re.sub(r"[^a-z0-9_]", "", text)).strip("_")
    if not text:
        raise InvalidQueueName(f"queue name {name!r} has no letters or digits")
    return text


def physical(name: str | None = None, priority: int | None = None) -> str:
    """The PGMQ queue for a logical queue (the default queue when None) and a priority."""
    s = settings()
    base = f"{s.queue_prefix}_{normalize(name or s.default_queue)}"
    if len(base) > MAX_PHYSICAL_NAME:
        raise InvalidQueueName(
            f"queue {base!r} is longer than {MAX_PHYSICAL_NAME} characters (prefix included)"
        )
    if s.priority_levels == 1:
        return base
    level = s.default_priority if priority is None else priority
    return f"{base}_p{min(max(level, 0), s.priority_levels - 1)}"


def read_order(names: list[str]) -> list[str]:
    """The PGMQ queues a worker of these logical queues reads, highest priority first."""
    s = settings()
    if s.priority_levels == 1:
        return [physical(n) for n in names]
    return [physical(n, p) for p in range(s.priority_levels) for n in names]

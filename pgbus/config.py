"""One settings object: defaults, validation, and `pgbus.configure(...)`.

Every setting is validated when it is set: a wrong type or value raises ConfigurationError
naming the setting and why, and leaves the current settings unchanged.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from pgbus.errors import ConfigurationError

Check = Callable[[str, Any], Any]


def _duration(name: str, value: Any) -> timedelta:
    """A timedelta, or seconds as a number; never negative."""
    if isinstance(value, bool) or not isinstance(value, timedelta | int | float):
        raise ConfigurationError(name, f"must be a timedelta or seconds, got {value!r}")
    td = value if isinstance(value, timedelta) else timedelta(seconds=value)
    if td < timedelta(0):
        raise ConfigurationError(name, f"must not be negative, got {value!r}")
    return td


def _positive_duration(name: str, value: Any) -> timedelta:
    td = _duration(name, value)
    if td == timedelta(0):
        raise ConfigurationError(name, "must be longer than zero")
    return td


def _int_at_least(low: int) -> Check:
    def check(name: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigurationError(name, f"must be a whole number, got {value!r}")
        if value < low:
            raise ConfigurationError(name, f"must be at least {low}, got {value}")
        return value

    return check


def _optional_int_at_least(low: int) -> Check:
    """None, or a whole number from `low` (also as digits: from the environment)."""

    def check(name: str, value: Any) -> int | None:
        if value is None:
            return None
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        return _int_at_least(low)(name, value)

    return check


def _int_between(low: int, high: int) -> Check:
    def check(name: str, value: Any) -> int:
        value = _int_at_least(low)(name, value)
        if value > high:
            raise ConfigurationError(name, f"must be at most {high}, got {value}")
        return value

    return check


def _fraction(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ConfigurationError(name, f"must be a number from 0 to 1, got {value!r}")
    return float(value)


def _boolean(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigurationError(name, f"must be True or False, got {value!r}")
    return value


def _optional_text(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(name, f"must be a non-empty string or None, got {value!r}")
    return value.strip()


def _database_url(name: str, value: Any) -> str | None:
    url = _optional_text(name, value)
    if url is not None and not re.match(r"^postgres(ql)?://", url):
        raise ConfigurationError(name, "must be a postgresql:// URL")
    return url


def _queue_word(name: str, value: Any) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[a-z][a-z0-9_]{0,15}", value):
        raise ConfigurationError(
            name,
            f"must be 1-16 lowercase letters, digits or _, starting with a letter, got {value!r}",
        )
    return value


def _choice(*allowed: str) -> Check:
    def check(name: str, value: Any) -> str:
        if value not in allowed:
            raise ConfigurationError(name, f"must be one of {', '.join(allowed)}; got {value!r}")
        return value

    return check


def _callables(name: str, value: Any) -> tuple[Callable[..., Any], ...]:
    items = tuple(value) if isinstance(value, list | tuple) else None
    if items is None or not all(callable(f) for f in items):
        raise ConfigurationError(name, "must be a list of callables taking (exception, context)")
    return items


def _workers(name: str, value: Any) -> tuple[dict[str, Any], ...]:
    """[{"queues": ["default"], "threads": 5}, ...]: one worker process each."""
    if not isinstance(value, list | tuple) or not value:
        raise ConfigurationError(
            name, "must be a non-empty list of {'queues': [...], 'threads': n}"
        )
    out = []
    for i, w in enumerate(value):
        where = f"{name}[{i}]"
        if not isinstance(w, dict) or set(w) - {"queues", "threads"}:
            raise ConfigurationError(where, "must be a dict with keys 'queues' and 'threads'")
        queues = w.get("queues", ["default"])
        if isinstance(queues, str) or not queues or not all(isinstance(q, str) for q in queues):
            raise ConfigurationError(f"{where}.queues", "must be a non-empty list of queue names")
        threads = _int_at_least(1)(f"{where}.threads", w.get("threads", 5))
        out.append({"queues": list(queues), "threads": threads})
    return tuple(out)


def _event_consumers(name: str, value: Any) -> tuple[dict[str, Any], ...]:
    """[{"topics": ["orders.#"], "threads": 3}, ...]: one consumer process each."""
    if not isinstance(value, list | tuple):
        raise ConfigurationError(name, "must be a list of {'topics': [...], 'threads': n}")
    out = []
    for i, c in enumerate(value):
        where = f"{name}[{i}]"
        if not isinstance(c, dict) or set(c) - {"topics", "threads"}:
            raise ConfigurationError(where, "must be a dict with keys 'topics' and 'threads'")
        topics = c.get("topics", ["#"])
        if isinstance(topics, str) or not topics or not all(isinstance(t, str) for t in topics):
            raise ConfigurationError(f"{where}.topics", "must be a non-empty list of patterns")
        threads = _int_at_least(1)(f"{where}.threads", c.get("threads", 3))
        out.append({"topics": list(topics), "threads": threads})
    return tuple(out)


def _time_zone(name: str, value: Any) -> str:
    from pgbus.scheduling import time_zone

    try:
        return time_zone(value).key
    except ValueError as exc:
        raise ConfigurationError(name, str(exc)) from None


def _optional_time_zone(name: str, value: Any) -> str | None:
    return None if value is None else _time_zone(name, value)


def _tasks(kind: str) -> Check:
    """recurring_tasks / deploy_tasks: {key: options}; checked in pgbus.scheduling."""

    def check(name: str, value: Any) -> Any:
        from pgbus.scheduling import check_setting

        return check_setting(kind, name, value)

    return check


def _optional_callable(name: str, value: Any) -> Callable[..., Any] | None:
    if value is not None and not callable(value):
        raise ConfigurationError(
            name, f"must be a callable taking the request, or None; got {value!r}"
        )
    return value


def _names(name: str, value: Any) -> tuple[str, ...]:
    items = tuple(value) if isinstance(value, list | tuple) else None
    if items is None or not all(isinstance(n, str) and n.strip() for n in items):
        raise ConfigurationError(name, "must be a list of non-empty strings")
    return tuple(n.strip() for n in items)


def _setting(default: Any, check: Check) -> Any:
    return dataclasses.field(default=default, metadata={"check": check})


@dataclasses.dataclass(frozen=True)
class Settings:
    """pgbus settings. Read the current ones with `pgbus.settings()`."""

    database_url: str | None = _setting(None, _database_url)
    pool_size: int = _setting(10, _int_at_least(1))
    queue_prefix: str = _setting("pgbus", _queue_word)
    default_queue: str = _setting("default", _queue_word)
    priority_levels: int = _setting(1, _int_at_least(1))
    default_priority: int = _setting(1, _int_at_least(0))
    visibility_timeout: timedelta = _setting(timedelta(seconds=30), _positive_duration)
    max_retries: int = _setting(5, _int_at_least(0))
    retry_backoff_base: timedelta = _setting(timedelta(seconds=5), _duration)
    retry_backoff_max: timedelta = _setting(timedelta(seconds=300), _duration)
    retry_backoff_jitter: float = _setting(0.15, _fraction)
    polling_interval: timedelta = _setting(timedelta(seconds=1), _positive_duration)
    listen_notify: bool = _setting(True, _boolean)
    workers: tuple[dict[str, Any], ...] = _setting(
        ({"queues": ["default", "workflows"], "threads": 5},), _workers
    )
    drain_timeout: timedelta = _setting(timedelta(seconds=30), _duration)
    # The event bus: one consumer process per entry under `pgbus start` (none by default).
    event_consumers: tuple[dict[str, Any], ...] = _setting((), _event_consumers)
    idempotency_ttl: timedelta = _setting(timedelta(days=7), _positive_duration)
    dispatch_interval: timedelta = _setting(timedelta(seconds=1), _positive_duration)
    heartbeat_interval: timedelta = _setting(timedelta(seconds=10), _positive_duration)
    stale_process_threshold: timedelta = _setting(timedelta(seconds=300), _positive_duration)
    stats_enabled: bool = _setting(True, _boolean)
    stats_retention: timedelta = _setting(timedelta(days=30), _positive_duration)
    workflow_queue: str = _setting("workflows", _queue_word)
    workflow_retention: timedelta = _setting(timedelta(days=30), _positive_duration)
    workflow_sweep_interval: timedelta = _setting(timedelta(seconds=30), _positive_duration)
    # False when pg_cron (or anything else) calls pgbus.workflow_sweep instead of the dispatcher.
    workflow_sweep_enabled: bool = _setting(True, _boolean)
    workflow_stall_threshold: timedelta = _setting(timedelta(minutes=15), _positive_duration)
    workflow_stall_action: str = _setting("pause", _choice("pause", "reattempt", "cancel"))
    workflow_overdue_after: timedelta = _setting(timedelta(minutes=5), _positive_duration)
    workflow_waiting_visibility_threshold: timedelta = _setting(
        timedelta(days=7), _positive_duration
    )
    # None: the database's limit (pgbus.settings, 65536 unless changed), which SQL enforces for
    # every caller; a number: a lower limit this process also applies before it writes.
    workflow_max_payload_size: int | None = _setting(None, _optional_int_at_least(256))
    workflow_error_backtrace_lines: int = _setting(30, _int_at_least(0))
    app_revision: str | None = _setting(None, _optional_text)
    # The scheduler: recurring tasks and deploy tasks (pgbus.scheduling, pgbus.scheduler).
    scheduler_enabled: bool = _setting(True, _boolean)
    scheduler_interval: timedelta = _setting(timedelta(seconds=1), _positive_duration)
    scheduler_time_zone: str = _setting("UTC", _time_zone)
    recurring_tasks: dict[str, Any] | None = _setting(None, _tasks("recurring"))
    recurring_tasks_file: str | None = _setting(None, _optional_text)
    recurring_catch_up_window: timedelta = _setting(timedelta(minutes=15), _duration)
    recurring_execution_retention: timedelta = _setting(timedelta(days=7), _positive_duration)
    deploy_tasks: dict[str, Any] | None = _setting(None, _tasks("deploy"))
    deploy_tasks_file: str | None = _setting(None, _optional_text)
    deploy_task_run_retention: timedelta = _setting(timedelta(days=90), _positive_duration)
    error_reporters: tuple[Callable[..., Any], ...] = _setting((), _callables)
    metrics_backend: str | None = _setting(
        None, lambda n, v: None if v is None else _choice("prometheus", "statsd")(n, v)
    )
    statsd_host: str = _setting("127.0.0.1", lambda n, v: _optional_text(n, v) or "127.0.0.1")
    statsd_port: int = _setting(8125, _int_at_least(1))
    # The dashboard (pgbus.web): who may use it, how often live regions refresh, page size,
    # and which payload keys are shown as [FILTERED].
    web_auth: Callable[..., Any] | None = _setting(None, _optional_callable)
    web_refresh_interval: timedelta = _setting(timedelta(seconds=5), _positive_duration)
    web_per_page: int = _setting(25, _int_between(1, 200))
    # The zone whose wall clock the workflow insights' buckets follow (None: the database
    # server's TimeZone).
    web_time_zone: str | None = _setting(None, _optional_time_zone)
    web_filter_parameters: tuple[str, ...] = _setting(
        (
            "password",
            "passphrase",
            "secret",
            "token",
            "authorization",
            "api_key",
            "private_key",
            "access_key",
            "secret_key",
            "*_key",
        ),
        _names,
    )
    # The workflow pages: who an action is recorded as ("dashboard:<web_actor(request)>"), and
    # where a run's subject links to (only an http(s) URL or a same-site path is linked).
    web_actor: Callable[..., Any] | None = _setting(None, _optional_callable)
    workflow_subject_url: Callable[..., Any] | None = _setting(None, _optional_callable)
    # The MCP server (pgbus.mcp): build the workflow write tools (resume, cancel, skip step,
    # resume at, run now, signal). Read when the server is built; enable only behind auth.
    mcp_write_tools: bool = _setting(False, _boolean)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = f.metadata["check"](f.name, getattr(self, f.name))
            object.__setattr__(self, f.name, value)
        if self.priority_levels > 10:
            raise ConfigurationError("priority_levels", "must be at most 10")
        if self.retry_backoff_base > self.retry_backoff_max:
            raise ConfigurationError("retry_backoff_base", "must not exceed retry_backoff_max")
        if self.recurring_execution_retention < self.recurring_catch_up_window:
            raise ConfigurationError(
                "recurring_execution_retention",
                "must not be shorter than recurring_catch_up_window",
            )

    def revision(self) -> str | None:
        """The app revision stamped on processes and step attempts: the app_revision setting,
        else PGBUS_REVISION, DASH_VERSION, KAMAL_VERSION, else the first line of a REVISION
        file in the working folder."""
        if self.app_revision:
            return self.app_revision
        for variable in ("PGBUS_REVISION", "DASH_VERSION", "KAMAL_VERSION"):
            env = os.environ.get(variable, "").strip()
            if env:
                return env
        try:
            with open("REVISION", encoding="utf-8") as fh:
                return fh.readline().strip() or None
        except OSError:
            return None

    def dsn(self) -> str:
        """The database URL: the setting, else PGBUS_DATABASE_URL."""
        url = self.database_url or _database_url(
            "PGBUS_DATABASE_URL", os.environ.get("PGBUS_DATABASE_URL") or None
        )
        if not url:
            raise ConfigurationError(
                "database_url",
                "is not set: set PGBUS_DATABASE_URL or pgbus.configure(database_url=...)",
            )
        return url


# The words an environment variable may say a yes or a no with.
_YES_NO = dict.fromkeys(("1", "true", "yes", "on"), True) | dict.fromkeys(
    ("0", "false", "no", "off"), False
)


def env_boolean(text: str) -> bool:
    """A yes or a no from an environment variable; KeyError for any other word."""
    return _YES_NO[text.strip().lower()]


# Settings that an environment variable PGBUS_<NAME> can set (the rest need Python values).
_ENV_PARSERS: dict[type, Callable[[str], Any]] = {
    bool: env_boolean,
    int: int,
    float: float,
    timedelta: float,
    str: str,
}


def from_environment(environ: Mapping[str, str] | None = None) -> Settings:
    """Defaults overridden by PGBUS_<SETTING> variables (PGBUS_VISIBILITY_TIMEOUT=10, ...)."""
    env = os.environ if environ is None else environ
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(Settings):
        raw = env.get(f"PGBUS_{f.name.upper()}")
        default = f.default
        parse = _ENV_PARSERS.get(type(default)) or (_ENV_PARSERS[str] if default is None else None)
        if raw is None or parse is None or f.name in ("database_url", "web_auth"):
            continue
        try:
            changes[f.name] = parse(raw.strip())
        except (KeyError, ValueError):
            raise ConfigurationError(
                f.name, f"cannot be read from PGBUS_{f.name.upper()}={raw!r}"
            ) from None
    return Settings(**changes)


_current: Settings | None = None  # read from the environment on first use


def settings() -> Settings:
    """The settings in force."""
    global _current
    if _current is None:
        _current = from_environment()
    return _current


def configure(**changes: Any) -> Settings:
    """Change settings; all are validated before any takes effect."""
    global _current
    known = {f.name for f in dataclasses.fields(Settings)}
    unknown = sorted(set(changes) - known)
    if unknown:
        raise ConfigurationError(unknown[0], "is not a pgbus setting")
    _current = dataclasses.replace(settings(), **changes)
    return _current


def reset() -> Settings:
    """Back to the defaults and the environment (tests use this)."""
    global _current
    _current = from_environment()
    return _current

"""Recurring and deploy task declarations: parsed, checked and turned into the rows the SQL
functions take; schedules and their ticks in a time zone.

    # recurring.yml
    nightly_cleanup:
      class: myapp.jobs:Cleanup          # a pgbus job or workflow class
      args: [30]
      schedule: "0 3 * * *"              # cron (minute hour day month weekday), or:
      # every: 5m                        # 30s, 5m, 2h, 1d: from the Unix epoch, in UTC
      time_zone: Europe/Berlin           # else the scheduler_time_zone setting
      queue: maintenance
      description: Deletes old rows

    # deploy_tasks.yml: the same minus the schedule, plus `version:` or `every_deploy: true`
    backfill_names:
      class: myapp.jobs:BackfillNames
      version: 2

A declaration is checked as a whole before anything is written: a bad entry raises
TaskDeclarationError naming its key and the reason, and no task changes.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from cronsim import CronSim, CronSimError

from pgbus.errors import PgbusError

KEY_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}")
EVERY_PATTERN = re.compile(r"(?:every\s+)?(\d+)\s*(s|m|h|d)", re.IGNORECASE)
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
UNIT_WORDS = {"s": "second", "m": "minute", "h": "hour", "d": "day"}
COMMON = {"class", "args", "kwargs", "queue", "priority", "description", "enabled"}
RECURRING_KEYS = COMMON | {"schedule", "every", "time_zone"}
DEPLOY_KEYS = COMMON | {"version", "every_deploy"}
DEFAULT_FILES = {
    "recurring": ("recurring.yml", "config/recurring.yml"),
    "deploy": ("deploy_tasks.yml", "config/deploy_tasks.yml"),
}


class TaskDeclarationError(PgbusError):
    """A recurring or deploy task declaration that cannot be used; names the task and why."""

    def __init__(self, source: str, key: str | None, reason: str) -> None:
        self.source = source
        self.key = key
        self.reason = reason
        where = f"{source}: task {key!r}" if key is not None else source
        super().__init__(f"{where}: {reason}")


def time_zone(name: Any) -> ZoneInfo:
    """The zone, or ValueError with the reason."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"time_zone must be a zone name such as 'Europe/Berlin', got {name!r}")
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"time_zone {name!r} is not a known time zone") from None


@dataclasses.dataclass(frozen=True)
class Schedule:
    """A cron line in a time zone, or a fixed interval (`every`) counted from the Unix epoch."""

    text: str
    time_zone: str
    cron: str | None = None
    every: timedelta | None = None

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.time_zone)

    def ticks(self, after: datetime, until: datetime, limit: int = 100_000) -> list[datetime]:
        """The fire times t with after < t <= until, in UTC, oldest first."""
        out: list[datetime] = []
        if self.every is not None:
            step = int(self.every.total_seconds())
            n = int(after.timestamp()) // step + 1
            while len(out) < limit:
                at = datetime.fromtimestamp(n * step, UTC)
                if at > until:
                    break
                if at > after:
                    out.append(at)
                n += 1
            return out
        assert self.cron is not None
        for local in CronSim(self.cron, after.astimezone(self.zone)):
            at = local.astimezone(UTC)
            if at > until or len(out) >= limit:
                break
            out.append(at)
        return out

    def next_after(self, at: datetime) -> datetime:
        if self.every is not None:
            step = int(self.every.total_seconds())
            return datetime.fromtimestamp((int(at.timestamp()) // step + 1) * step, UTC)
        assert self.cron is not None
        return next(CronSim(self.cron, at.astimezone(self.zone))).astimezone(UTC)

    def in_words(self) -> str:
        if self.every is not None:
            seconds = int(self.every.total_seconds())
            for unit in ("d", "h", "m", "s"):
                if seconds % UNIT_SECONDS[unit] == 0:
                    n = seconds // UNIT_SECONDS[unit]
                    word = UNIT_WORDS[unit]
                    return f"Every {word}" if n == 1 else f"Every {n} {word}s"
        assert self.cron is not None
        words = CronSim(self.cron, datetime(2000, 1, 1, tzinfo=UTC)).explain()
        return words if self.time_zone == "UTC" else f"{words} ({self.time_zone})"


def parse_schedule(text: Any, zone_name: str = "UTC") -> Schedule:
    """A cron line ("*/5 * * * *") or an interval ("every 5m", "30s"); ValueError says why not."""
    zone = time_zone(zone_name)
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"schedule must be a cron line or 'every 5m', got {text!r}")
    text = " ".join(text.split())
    every = EVERY_PATTERN.fullmatch(text)
    if every:
        n, unit = int(every.group(1)), every.group(2).lower()
        if n < 1:
            raise ValueError(f"schedule {text!r}: the interval must be at least 1{unit}")
        return Schedule(text, zone.key, every=timedelta(seconds=n * UNIT_SECONDS[unit]))
    if text.lower().startswith("every"):
        raise ValueError(
            f"schedule {text!r} is not an interval: write 'every' and a number with s, m, h or d"
            " (every 30s, every 5m, every 2h, every 1d)"
        )
    if len(text.split()) != 5:
        raise ValueError(
            f"schedule {text!r} is not a cron line: it needs 5 fields (minute hour day month"
            " weekday)"
        )
    try:
        CronSim(text, datetime(2000, 1, 1, tzinfo=zone))
    except CronSimError as exc:
        raise ValueError(f"schedule {text!r} is not a valid cron line: {exc}") from None
    return Schedule(text, zone.key, cron=text)


@dataclasses.dataclass(frozen=True)
class Declared:
    """One checked task: what the SQL functions store, and for a recurring task its schedule."""

    key: str
    target: str  # "job" or "workflow"
    class_name: str
    arguments: dict[str, Any]
    queue_name: str | None
    priority: int | None
    description: str | None
    enabled: bool
    schedule: Schedule | None = None
    version: str | None = None
    every_deploy: bool = False
    workflow_class: Any = None  # registered with the database before the scheduler fires

    def row(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "key": self.key,
            "target": self.target,
            "class_name": self.class_name,
            "arguments": self.arguments,
            "queue_name": self.queue_name,
            "priority": self.priority,
            "description": self.description,
            "enabled": self.enabled,
        }
        if self.schedule is not None:
            out.update(
                schedule=self.schedule.text,
                human_schedule=self.schedule.in_words(),
                time_zone=self.schedule.time_zone,
            )
        else:
            out.update(version=self.version, every_deploy=self.every_deploy)
        return out


def resolve_class(path: Any) -> tuple[str, str, Any]:
    """("job" | "workflow", stored name, class) for "package.module:Class" (or
    "package.module.Class", or a job's registered name); ValueError says why not."""
    from pgbus.jobs import Job, _registry
    from pgbus.workflow.base import Workflow

    if not isinstance(path, str) or not path.strip():
        raise ValueError(f"class must name a job or workflow class, got {path!r}")
    path = path.strip()
    cls = _registry.get(path)
    if cls is None:
        module, sep, name = path.partition(":")
        if not sep:
            module, _, name = path.rpartition(".")
        if not module or not name:
            raise ValueError(f"class {path!r} must be written package.module:Class")
        try:
            cls = importlib.import_module(module)
            for part in name.split("."):
                cls = getattr(cls, part)
        except ImportError as exc:
            raise ValueError(f"class {path!r}: cannot import {module!r} ({exc})") from None
        except AttributeError:
            raise ValueError(f"class {path!r}: {module!r} has no {name!r}") from None
    if isinstance(cls, type) and issubclass(cls, Workflow):
        return "workflow", cls.workflow_name, cls
    if isinstance(cls, type) and issubclass(cls, Job):
        return "job", cls.job_name, cls
    raise ValueError(f"class {path!r} is neither a pgbus.Job nor a pgbus.Workflow")


def _entry(kind: str, key: Any, raw: Any, default_zone: str, resolve: bool) -> Declared:
    from pgbus import queues
    from pgbus.serialization import dump_arguments

    if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
        raise ValueError(
            "a task key must be 1-200 letters, digits, '_', '.', ':' or '-', starting with a"
            " letter or digit"
        )
    if not isinstance(raw, Mapping):
        raise ValueError(f"must be a mapping of options, got {type(raw).__name__}")
    allowed = RECURRING_KEYS if kind == "recurring" else DEPLOY_KEYS
    unknown = sorted(str(k) for k in raw if k not in allowed)
    if unknown:
        raise ValueError(f"unknown option {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})")
    if "class" not in raw:
        raise ValueError("needs a class (package.module:Class)")
    args = raw.get("args", [])
    if args is None:
        args = []
    if not isinstance(args, list):
        args = [args]
    kwargs = raw.get("kwargs") or {}
    if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
        raise ValueError("kwargs must be a mapping of names to values")
    enabled = raw.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ValueError(f"enabled must be true or false, got {enabled!r}")
    priority = raw.get("priority")
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
        raise ValueError(f"priority must be a whole number, got {priority!r}")
    description = raw.get("description")
    if description is not None and not isinstance(description, str):
        raise ValueError("description must be text")
    queue = raw.get("queue")
    if queue is not None:
        if not isinstance(queue, str):
            raise ValueError(f"queue must be a queue name, got {queue!r}")
        queues.normalize(queue)

    schedule = None
    version = None
    every_deploy = False
    if kind == "recurring":
        has_schedule, has_every = "schedule" in raw, "every" in raw
        if has_schedule == has_every:
            raise ValueError("needs exactly one of schedule (a cron line) or every (5m, 1h...)")
        zone = raw.get("time_zone", default_zone)
        text = raw["schedule"] if has_schedule else raw["every"]
        if has_every and isinstance(text, str) and not text.lower().startswith("every"):
            text = f"every {text}"
        schedule = parse_schedule(text, zone)
    else:
        every_deploy = raw.get("every_deploy", False)
        if not isinstance(every_deploy, bool):
            raise ValueError(f"every_deploy must be true or false, got {every_deploy!r}")
        version = raw.get("version")
        if isinstance(version, bool) or (
            version is not None and not isinstance(version, str | int | float)
        ):
            raise ValueError(f"version must be a number or text, got {version!r}")
        version = None if version is None else str(version).strip() or None
        if (version is None) == (not every_deploy):
            raise ValueError(
                "needs exactly one of version: (run once per version) or every_deploy: true"
            )

    target, class_name, workflow_class = "job", str(raw["class"]), None
    if resolve:
        target, class_name, cls = resolve_class(raw["class"])
        if target == "workflow":
            if args:
                raise ValueError("a workflow takes keyword arguments only: use kwargs")
            if queue is not None or priority is not None:
                raise ValueError(
                    "queue and priority do not apply to a workflow (its steps set them)"
                )
            workflow_class = cls
            from pgbus.workflow.payloads import encode_payload

            arguments = encode_payload(dict(kwargs), "the task's kwargs")
            queue_name = None
        else:
            arguments = dump_arguments(tuple(args), dict(kwargs))
            queue_name = cls.set(queue=queue, priority=priority).physical_queue()
    else:
        arguments = dump_arguments(tuple(args), dict(kwargs))
        queue_name = queue
    return Declared(
        key=key,
        target=target,
        class_name=class_name,
        arguments=arguments,
        queue_name=queue_name,
        priority=priority,
        description=description,
        enabled=enabled,
        schedule=schedule,
        version=version,
        every_deploy=every_deploy,
        workflow_class=workflow_class,
    )


def parse_tasks(
    kind: str, raw: Any, source: str, default_zone: str = "UTC", resolve: bool = True
) -> list[Declared]:
    """Every entry of a mapping {key: options}, checked; the first bad one raises
    TaskDeclarationError with its key and the reason."""
    if raw is None:
        return []
    if not isinstance(raw, Mapping):
        raise TaskDeclarationError(
            source, None, f"must be a mapping of task keys to options, got {type(raw).__name__}"
        )
    out = []
    for key, options in raw.items():
        try:
            out.append(_entry(kind, key, options, default_zone, resolve))
        except TaskDeclarationError:
            raise
        except (ValueError, PgbusError) as exc:
            raise TaskDeclarationError(source, str(key), str(exc)) from None
    return out


def read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TaskDeclarationError(str(path), None, f"cannot be read: {exc.strerror}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise TaskDeclarationError(
            str(path), None, f"is not valid YAML{where}: {problem}"
        ) from None


def _task_file(kind: str, configured: str | None) -> Path | None:
    if configured:
        path = Path(configured)
        if not path.is_file():
            raise TaskDeclarationError(configured, None, "does not exist")
        return path
    return next((Path(p) for p in DEFAULT_FILES[kind] if Path(p).is_file()), None)


def load_tasks(kind: str, resolve: bool = True) -> list[Declared]:
    """The declared tasks of `kind` ("recurring" or "deploy"): the file's (the
    recurring_tasks_file / deploy_tasks_file setting, else recurring.yml or deploy_tasks.yml in
    the working folder or config/) and the setting's (recurring_tasks / deploy_tasks). A key in
    both is refused."""
    from pgbus.config import settings

    s = settings()
    zone = s.scheduler_time_zone
    configured = s.recurring_tasks_file if kind == "recurring" else s.deploy_tasks_file
    inline = s.recurring_tasks if kind == "recurring" else s.deploy_tasks
    tasks: list[Declared] = []
    path = _task_file(kind, configured)
    if path is not None:
        tasks += parse_tasks(kind, read_yaml(path), str(path), zone, resolve)
    setting = "recurring_tasks" if kind == "recurring" else "deploy_tasks"
    for task in parse_tasks(kind, inline, f"the {setting} setting", zone, resolve):
        if any(t.key == task.key for t in tasks):
            raise TaskDeclarationError(
                f"the {setting} setting", task.key, f"is declared in {path} too"
            )
        tasks.append(task)
    return tasks


def check_setting(kind: str, name: str, value: Any) -> dict[str, Any] | None:
    """The check of the recurring_tasks / deploy_tasks settings: everything but the classes
    (their modules may not be imported yet) is checked when the setting is set."""
    from pgbus.errors import ConfigurationError

    if value is None:
        return None
    try:
        parse_tasks(kind, value, f"the {name} setting", resolve=False)
    except TaskDeclarationError as exc:
        where = name if exc.key is None else f"{name}[{exc.key!r}]"
        raise ConfigurationError(where, exc.reason) from None
    return dict(value)


# -------------------------------------------------------------------------------------------
# Operations and reads (the dashboard's actions and the MCP tools call these). Each is one SQL
# function; refusals come back as {"ok": False, "code": ...}.
# -------------------------------------------------------------------------------------------


def _call(query: str, params: tuple[Any, ...], conn: Any = None) -> Any:
    from pgbus.jobs import connection

    with connection(conn) as c:
        return c.execute(query, params).fetchone()[0]


def run_recurring_now(key: str, conn: Any = None) -> dict[str, Any]:
    """Enqueues a recurring task at once (a manual execution, claiming no tick)."""
    return _call("SELECT pgbus.recurring_run_now(%s)", (key,), conn)


def set_recurring_enabled(key: str, enabled: bool, conn: Any = None) -> dict[str, Any]:
    return _call(
        "SELECT pgbus.recurring_set_enabled(task_key => %s, enabled => %s)", (key, enabled), conn
    )


def run_deploy_task_now(key: str, conn: Any = None) -> dict[str, Any]:
    """Enqueues a deploy task at once (a manual run, claiming no arm); emits
    pgbus.deploy_task.enqueue."""
    from pgbus.config import settings
    from pgbus.scheduler import emit_deploy_enqueue

    result = _call(
        "SELECT pgbus.deploy_task_run_now(task_key => %s, revision => %s)",
        (key, settings().revision()),
        conn,
    )
    if result.get("ok"):
        emit_deploy_enqueue(result)
    return result


def set_deploy_task_enabled(key: str, enabled: bool, conn: Any = None) -> dict[str, Any]:
    return _call(
        "SELECT pgbus.deploy_task_set_enabled(task_key => %s, enabled => %s)", (key, enabled), conn
    )


def _rows(query: str, params: tuple[Any, ...], conn: Any = None) -> list[dict[str, Any]]:
    from psycopg.rows import dict_row

    from pgbus.jobs import connection

    with connection(conn) as c, c.cursor(row_factory=dict_row) as cur:
        return cur.execute(query, params).fetchall()


def recurring_tasks(conn: Any = None) -> list[dict[str, Any]]:
    """Every recurring task: schedule (and in words), time zone, next and last run..."""
    return _rows("SELECT * FROM pgbus.recurring_task_list ORDER BY key", (), conn)


def recurring_executions(key: str, limit: int = 25, conn: Any = None) -> list[dict[str, Any]]:
    return _rows(
        "SELECT * FROM pgbus.recurring_executions_of(task_key => %s, max_rows => %s)",
        (key, limit),
        conn,
    )


def fleet_status(conn: Any = None) -> dict[str, Any]:
    """The rollover status: the newest revision, whether every live process runs it, the
    processes per revision."""
    from pgbus.config import settings

    return _call("SELECT pgbus.fleet_status(%s)", (settings().stale_process_threshold,), conn)


def deploy_tasks(conn: Any = None) -> list[dict[str, Any]]:
    """Every deploy task with its state for the fleet's revision and its last run."""
    from pgbus.config import settings

    return _rows(
        "SELECT * FROM pgbus.deploy_task_list(%s)", (settings().stale_process_threshold,), conn
    )


def deploy_task_runs(key: str, limit: int = 25, conn: Any = None) -> list[dict[str, Any]]:
    return _rows(
        "SELECT * FROM pgbus.deploy_task_runs_of(task_key => %s, max_rows => %s)",
        (key, limit),
        conn,
    )


def recurring_overview(
    page: int | None = None, per_page: int | None = None, conn: Any = None
) -> dict[str, Any]:
    """{"recurring_tasks": [...], "total", "has_more"}: every task, or one page (MCP
    pgbus_recurring)."""
    return _call(
        "SELECT pgbus.recurring_overview(page => %s, per_page => %s)", (page, per_page), conn
    )


def deploy_tasks_overview(recent: int = 5, conn: Any = None) -> dict[str, Any]:
    """{"fleet": fleet_status, "deploy_tasks": [... each with "recent_runs"]} (the Deploy tasks
    page, MCP pgbus_deploy_tasks)."""
    from pgbus.config import settings

    return _call(
        "SELECT pgbus.deploy_tasks_overview(live_within => %s, recent => %s)",
        (settings().stale_process_threshold, recent),
        conn,
    )

"""The read layer and the operator actions, shared by the dashboard and the MCP server.

Every method calls one SQL function or reads one view of the schema `pgbus` (the rules and the
numbers live there); nothing here computes a figure of its own. Reads return plain dicts.
Actions return the SQL function's answer `{"ok": bool, "code": str, "message": str, ...}`:
a refusal ("the message is no longer in the queue") is an answer, not an exception.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from pgbus.config import Settings, settings

# Bulk actions touch at most this many messages per call (per press of a button).
BULK_LIMIT = 1000
# Pages count a queue's messages only up to this many; a bigger queue shows an estimate
# (pgbus.queue_stats' count_limit), so a page costs the same with a million messages.
PAGE_COUNT_LIMIT = 1000
# The filters of the workflow list (pgbus.workflow_list's argument names).
WORKFLOW_FILTERS = (
    "only_status",
    "only_class",
    "only_step",
    "only_error_class",
    "only_subject_type",
    "only_subject_id",
    "only_run",
    "created_from",
    "created_to",
    "ended_from",
    "ended_to",
)
# A bulk resume or cancel of an attention group touches at most this many runs per press.
WORKFLOW_BULK_LIMIT = 500
# The periods the job insights offer, each with its bucket width.
INSIGHT_PERIODS = ("1h", "24h", "7d", "30d")
# The windows the workflow insights offer (pgbus.workflow_insights_window), 24h by default.
WORKFLOW_INSIGHT_WINDOWS = ("1h", "24h", "7d", "30d")

# The payload keys shown as [FILTERED] unless the web_filter_parameters setting says otherwise.
DEFAULT_FILTER: tuple[str, ...] = Settings.__dataclass_fields__["web_filter_parameters"].default

Outcome = dict[str, Any]

log = logging.getLogger(__name__)


def filter_secrets(value: Any, names: Iterable[str] = DEFAULT_FILTER) -> Any:
    """A copy of `value` with the values of secret-looking keys replaced by "[FILTERED]".

    A name matches a key case-insensitively as a substring ("password" hides "db_password");
    a name with `*` is a glob over the whole key ("*_key" hides "stripe_key").
    """
    patterns = _patterns(tuple(names))

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: "[FILTERED]" if _secret(str(k), patterns) else walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return walk(value)


_pattern_cache: dict[tuple[str, ...], list[re.Pattern[str]]] = {}


def _patterns(names: tuple[str, ...]) -> list[re.Pattern[str]]:
    found = _pattern_cache.get(names)
    if found is None:
        found = []
        for n in names:
            n = n.strip().lower()
            if not n:
                continue
            if "*" in n:
                found.append(re.compile("^" + ".*".join(map(re.escape, n.split("*"))) + "$"))
            else:
                found.append(re.compile(re.escape(n)))
        _pattern_cache[names] = found
    return found


def _secret(key: str, patterns: list[re.Pattern[str]]) -> bool:
    k = key.lower()
    return any(p.search(k) for p in patterns)


class DataSource:
    """Reads and actions against one database, through a small pool of its own."""

    def __init__(self, dsn: str | None = None, *, max_connections: int = 4) -> None:
        self._dsn = dsn
        self._max = max_connections
        self._pool: ConnectionPool | None = None
        self._lock = threading.Lock()

    # -- connections ---------------------------------------------------------------------

    def _conn(self):
        with self._lock:
            if self._pool is None:
                self._pool = ConnectionPool(
                    self._dsn or settings().dsn(),
                    min_size=1,
                    max_size=self._max,
                    kwargs={"autocommit": True, "row_factory": dict_row},
                    open=True,
                    name="pgbus-data",
                )
        return self._pool.connection(timeout=10)

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        with self._conn() as conn:
            return conn.execute(sql, params).fetchall()

    def _one(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
        rows = self._rows(sql, params)
        return rows[0] if rows else None

    def _value(self, sql: str, params: Sequence[Any] = ()) -> Any:
        row = self._one(sql, params)
        return None if row is None else next(iter(row.values()))

    # -- thresholds from the settings ----------------------------------------------------

    @staticmethod
    def _stale_after() -> timedelta:
        return settings().stale_process_threshold

    @staticmethod
    def _reuse_within() -> timedelta:
        """How long a big queue's capped figures are reused (pgbus.queue_stats' reuse_within):
        twice the pages' refresh interval, so a page refreshing itself counts every other time."""
        return settings().web_refresh_interval * 2

    @staticmethod
    def _stalled_after() -> timedelta:
        s = settings()
        return min(s.heartbeat_interval * 3, s.stale_process_threshold)

    # -- reads ---------------------------------------------------------------------------

    def ping(self) -> bool:
        return self._value("SELECT true") is True

    def summary(self, count_limit: int | None = PAGE_COUNT_LIMIT) -> dict[str, Any]:
        return self._value(
            "SELECT pgbus.dashboard_summary(stalled_after => %s, stale_after => %s, count_limit => %s)",
            (self._stalled_after(), self._stale_after(), count_limit),
        )

    def overview(
        self, count_limit: int | None = PAGE_COUNT_LIMIT, reuse: bool = True
    ) -> dict[str, Any]:
        """The home page's queues, summary and health verdict, counting the queues once (a big
        queue's capped figures reused when recent: see _reuse_within; reuse=False counts now)."""
        stalled, stale = self._stalled_after(), self._stale_after()
        reuse_within = self._reuse_within() if reuse else None
        return self._one(
            "WITH f AS MATERIALIZED (SELECT pgbus.queue_figures(alive_within => %s,"
            " count_limit => %s::integer, reuse_within => %s::interval) AS qs)"
            " SELECT f.qs AS queues, pgbus.dashboard_summary(stalled_after => %s,"
            " stale_after => %s, count_limit => %s::integer, queue_figures => f.qs) AS summary,"
            " pgbus.health_verdict(stalled_after => %s, stale_after => %s,"
            " count_limit => %s::integer, queue_figures => f.qs) AS verdict"
            " FROM f",
            (
                stale,
                count_limit,
                reuse_within,
                stalled,
                stale,
                count_limit,
                stalled,
                stale,
                count_limit,
            ),
        )

    def queues(
        self, count_limit: int | None = PAGE_COUNT_LIMIT, reuse: bool = False
    ) -> list[dict[str, Any]]:
        """Every queue's figures; count_limit=None counts every message (slower); reuse=True
        reuses a big queue's recent capped figures (see _reuse_within)."""
        return self._rows(
            "SELECT * FROM pgbus.queue_stats(only_queue => NULL, alive_within => %s, count_limit => %s, reuse_within => %s::interval)",
            (self._stale_after(), count_limit, self._reuse_within() if reuse else None),
        )

    def queue_names(self) -> list[str]:
        return [
            r["queue_name"]
            for r in self._rows("SELECT queue_name FROM pgmq.list_queues() ORDER BY 1")
        ]

    def queue(self, name: str, count_limit: int | None = PAGE_COUNT_LIMIT) -> dict[str, Any] | None:
        return self._one(
            "SELECT * FROM pgbus.queue_stats(only_queue => %s, alive_within => %s, count_limit => %s)",
            (name, self._stale_after(), count_limit),
        )

    def queue_messages(
        self, name: str, before_id: int | None = None, page_size: int = 25
    ) -> list[dict[str, Any]]:
        return self._rows(
            "SELECT * FROM pgbus.queue_messages(queue => %s, before_id => %s, page_size => %s, alive_within => %s)",
            (name, before_id, page_size, self._stale_after()),
        )

    def messages(
        self,
        *,
        dead_letters: bool,
        queue: str | None = None,
        before: tuple[datetime, str, int] | None = None,
        page_size: int = 25,
    ) -> list[dict[str, Any]]:
        at, q, i = before if before else (None, None, None)
        return self._rows(
            "SELECT * FROM pgbus.messages_across(dead_letters => %s, only_queue => %s, before_at => %s, before_queue => %s, before_id => %s, page_size => %s, alive_within => %s)",
            (dead_letters, queue, at, q, i, page_size, self._stale_after()),
        )

    def messages_cursor(
        self, *, dead_letters: bool, queue: str | None = None, skip: int = 0
    ) -> tuple[datetime, str, int] | None:
        """The cursor `skip` messages into messages()' list (pgbus.messages_cursor): pass it
        as `before` to read from message skip + 1. None when fewer messages wait."""
        row = self._one(
            "SELECT * FROM pgbus.messages_cursor(dead_letters => %s, only_queue => %s, skip => %s)",
            (dead_letters, queue, skip),
        )
        return (row["before_at"], row["before_queue"], row["before_id"]) if row else None

    def message(self, queue: str, msg_id: int) -> dict[str, Any] | None:
        return self._one(
            "SELECT * FROM pgbus.queue_message(queue => %s, id => %s::bigint, alive_within => %s)",
            (queue, msg_id, self._stale_after()),
        )

    def failed_jobs(
        self,
        *,
        queue: str | None = None,
        before: tuple[datetime, str, int] | None = None,
        page_size: int = 25,
    ) -> list[dict[str, Any]]:
        at, q, i = before if before else (None, None, None)
        return self._rows(
            "SELECT * FROM pgbus.failed_jobs(only_queue => %s, before_at => %s, before_queue => %s, before_id => %s, page_size => %s, alive_within => %s)",
            (queue, at, q, i, page_size, self._stale_after()),
        )

    def events(self, recent: int = 25) -> dict[str, Any]:
        """The event bus: bindings, queues' pending and dead counts, newest pending and dead
        events, processed-event claims (pgbus.event_overview)."""
        out = self._value("SELECT pgbus.event_overview(%s)", (recent,))
        for row in out["pending"] + out["dead"]:
            _times(row, ("enqueued_at", "vt"))
        for row in out["processed"]["recent"]:
            _times(row, ("claimed_at", "completed_at"))
        for row in out["subscribers"]:
            _times(row, ("bound_at",))
        return out

    def processes(self) -> list[dict[str, Any]]:
        return self._rows(
            "SELECT * FROM pgbus.process_status(stalled_after => %s, stale_after => %s)",
            (self._stalled_after(), self._stale_after()),
        )

    def batches(self, limit: int = 100) -> list[dict[str, Any]]:
        return self._rows(
            "SELECT * FROM pgbus.batch_overview ORDER BY created_at DESC, batch_id LIMIT %s",
            (max(1, min(limit, 500)),),
        )

    def batch(self, batch_id: str) -> dict[str, Any] | None:
        return self._one(
            "SELECT * FROM pgbus.batch_overview WHERE batch_id = %s::uuid", (batch_id,)
        )

    def table_health(self) -> list[dict[str, Any]]:
        return self._rows(
            "SELECT * FROM pgbus.queue_table_health ORDER BY dead_tuples DESC, table_name"
        )

    def workflow_counts(self) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM pgbus.workflow_status_counts")

    def health(self, reuse: bool = False) -> dict[str, Any]:
        """The verdict OK / DEGRADED / STALLED with its reasons (pgbus.health_verdict);
        reuse=True reuses a big queue's recent capped figures (see _reuse_within)."""
        return self._value(
            "SELECT pgbus.health_verdict(stalled_after => %s, stale_after => %s,"
            " count_limit => %s, queue_figures =>"
            " pgbus.queue_figures(alive_within => %s, count_limit => %s, reuse_within => %s::interval))",
            (
                self._stalled_after(),
                self._stale_after(),
                PAGE_COUNT_LIMIT,
                self._stale_after(),
                PAGE_COUNT_LIMIT,
                self._reuse_within() if reuse else None,
            ),
        )

    def job_insights(self, period: str) -> dict[str, Any]:
        return self._value("SELECT pgbus.job_insights(%s)", (period,))

    # -- recurring and deploy tasks (sql/functions/2xx) ----------------------------------

    def recurring_tasks(self) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM pgbus.recurring_task_list ORDER BY key")

    def recurring_task(self, key: str) -> dict[str, Any] | None:
        return self._one("SELECT * FROM pgbus.recurring_task_list WHERE key = %s", (key,))

    def recurring_executions(self, key: str, limit: int = 25) -> list[dict[str, Any]]:
        return self._rows(
            "SELECT * FROM pgbus.recurring_executions_of(task_key => %s, max_rows => %s)",
            (key, limit),
        )

    def recurring_overview(
        self, page: int | None = None, per_page: int | None = None
    ) -> dict[str, Any]:
        """{"recurring_tasks": [...], "total", "has_more"}: every task, or one page
        (pgbus.recurring_overview; MCP pgbus_recurring)."""
        return self._value(
            "SELECT pgbus.recurring_overview(page => %s, per_page => %s)", (page, per_page)
        )

    def deploy_tasks_overview(self, recent: int = 5) -> dict[str, Any]:
        """{"fleet", "deploy_tasks": [... each with "recent_runs"]}
        (pgbus.deploy_tasks_overview; MCP pgbus_deploy_tasks)."""
        return self._value(
            "SELECT pgbus.deploy_tasks_overview(live_within => %s, recent => %s)",
            (self._stale_after(), recent),
        )

    def fleet_status(self) -> dict[str, Any]:
        return self._value("SELECT pgbus.fleet_status(%s)", (self._stale_after(),))

    def deploy_tasks(self) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM pgbus.deploy_task_list(%s)", (self._stale_after(),))

    def deploy_task(self, key: str) -> dict[str, Any] | None:
        return self._one(
            "SELECT * FROM pgbus.deploy_task_list(%s) WHERE key = %s", (self._stale_after(), key)
        )

    def deploy_task_runs(self, key: str, limit: int = 25) -> list[dict[str, Any]]:
        return self._rows(
            "SELECT * FROM pgbus.deploy_task_runs_of(task_key => %s, max_rows => %s)", (key, limit)
        )

    # -- workflows -----------------------------------------------------------------------

    @staticmethod
    def _workflow_thresholds() -> tuple[timedelta, timedelta, timedelta]:
        s = settings()
        return (
            s.workflow_stall_threshold,
            s.workflow_overdue_after,
            s.workflow_waiting_visibility_threshold,
        )

    def workflow_runs(
        self,
        filters: dict[str, Any],
        before: tuple[datetime, str] | None = None,
        page_size: int = 25,
    ) -> list[dict[str, Any]]:
        """One page of runs (pgbus.workflow_list); filters use its argument names."""
        at, run = before if before else (None, None)
        names = [k for k in WORKFLOW_FILTERS if filters.get(k) is not None]
        args = "".join(f", {k} => %({k})s" for k in names)
        return self._rows(
            "SELECT * FROM pgbus.workflow_list(before_created => %(at)s, before_id => %(run)s::uuid,"
            f" page_size => %(size)s, overdue_after => %(overdue)s{args})",
            {
                **{k: filters[k] for k in names},
                "at": at,
                "run": run,
                "size": page_size,
                "overdue": settings().workflow_overdue_after,
            },
        )

    def workflow_runs_cursor(
        self, filters: dict[str, Any], skip: int
    ) -> tuple[datetime, str] | None:
        """The keyset cursor `skip` runs into the list (pgbus.workflow_list_cursor): pass it
        as workflow_runs' `before` to read from run skip + 1. None when fewer runs match."""
        names = [k for k in WORKFLOW_FILTERS if filters.get(k) is not None]
        args = "".join(f", {k} => %({k})s" for k in names)
        row = self._one(
            f"SELECT * FROM pgbus.workflow_list_cursor(%(skip)s{args})",
            {**{k: filters[k] for k in names}, "skip": skip},
        )
        return (row["before_created"], str(row["before_id"])) if row else None

    def workflow_runs_count(self, filters: dict[str, Any], cap: int = 10000) -> dict[str, Any]:
        """How many runs match, up to `cap` ({"count", "capped"})."""
        names = [k for k in WORKFLOW_FILTERS if filters.get(k) is not None]
        args = "".join(f", {k} => %({k})s" for k in names)
        return self._value(
            f"SELECT pgbus.workflow_list_count(cap => %(cap)s{args})",
            {**{k: filters[k] for k in names}, "cap": cap},
        )

    def workflow(self, workflow_id: str) -> dict[str, Any] | None:
        """Everything a run's page shows (pgbus.workflow_detail), or None. Its times (JSON
        text) come back as datetimes."""
        detail = self._value(
            "SELECT pgbus.workflow_detail(workflow_id => %s::uuid, overdue_after => %s)",
            (workflow_id, settings().workflow_overdue_after),
        )
        if detail is not None:
            _times(detail["run"], ("created_at", "updated_at", "ended_at"))
            for e in detail["events"]:
                _times(e, ("created_at",))
            for g in detail["signals"]:
                _times(g, ("created_at", "claimed_at", "consumed_at"))
        return detail

    def workflow_classes(self) -> list[str]:
        return [
            r["workflow_class"]
            for r in self._rows(
                "SELECT workflow_class FROM pgbus.workflow_definitions ORDER BY workflow_class"
            )
        ]

    # -- workflow insights (pgbus.workflow_definitions_overview and pgbus.workflow_class_*) ----

    def workflow_definitions(self, window: str = "24h") -> list[dict[str, Any]]:
        """One row per workflow class over the window (capped at workflow_retention)."""
        return self._rows(
            "SELECT * FROM pgbus.workflow_definitions_overview(window_name => %s, retention => %s,"
            " as_of => now(), stall_threshold => %s, overdue_after => %s, waiting_threshold => %s)",
            (window, settings().workflow_retention, *self._workflow_thresholds()),
        )

    def workflow_class_exists(self, workflow_class: str) -> bool:
        return bool(self._value("SELECT pgbus.workflow_class_exists(%s)", (workflow_class,)))

    def workflow_class_page(self, workflow_class: str, window: str = "24h") -> dict | None:
        """Every block of a class's page in one call (pgbus.workflow_class_page), or None when no
        definition or run has the name."""
        s = settings()
        return self._value(
            "SELECT pgbus.workflow_class_page(workflow_class => %s, window_name => %s, time_zone => %s,"
            " retention => %s, stall_threshold => %s, overdue_after => %s, waiting_threshold => %s,"
            " max_revisions => 5)",
            (
                workflow_class,
                window,
                s.web_time_zone,
                s.workflow_retention,
                *self._workflow_thresholds(),
            ),
        )

    def workflow_class_block(
        self, block: str, workflow_class: str, window: str = "24h"
    ) -> dict[str, Any]:
        """One block of a class's insights page: "steps" (or "steps+revisions", both from one
        read), "throughput" (in the web_time_zone setting's wall clock, else the server's),
        "durations", "funnel" or "revisions"."""
        retention = settings().workflow_retention
        if block == "throughput":
            return self._value(
                "SELECT pgbus.workflow_class_throughput(workflow_class => %s, window_name => %s, time_zone => %s, retention => %s)",
                (workflow_class, window, settings().web_time_zone, retention),
            )
        if block in ("steps", "steps+revisions"):
            # "steps+revisions": the pipeline with the last five revisions, one read.
            return self._value(
                "SELECT pgbus.workflow_class_steps(workflow_class => %s, window_name => %s,"
                " retention => %s, as_of => now(), stall_threshold => %s, overdue_after => %s,"
                " waiting_threshold => %s, max_revisions => %s)",
                (
                    workflow_class,
                    window,
                    retention,
                    *self._workflow_thresholds(),
                    5 if block == "steps+revisions" else None,
                ),
            )
        if block not in ("durations", "funnel", "revisions"):
            raise ValueError(f"no such insights block: {block!r}")
        return self._value(
            f"SELECT pgbus.workflow_class_{block}(%s, %s, %s)",
            (workflow_class, window, retention),
        )

    def workflow_attention(self, only_class: str | None = None) -> list[dict[str, Any]]:
        """Stuck runs grouped by class, step, reason and error class."""
        return self._rows(
            "SELECT * FROM pgbus.workflow_attention(only_class => %s, stall_threshold => %s, overdue_after => %s, waiting_threshold => %s)",
            (only_class, *self._workflow_thresholds()),
        )

    def workflow_home_card(self) -> dict[str, Any]:
        return self._value(
            "SELECT pgbus.workflow_home_card(stall_threshold => %s, overdue_after => %s, waiting_threshold => %s)",
            self._workflow_thresholds(),
        )

    def workflow_command(
        self,
        workflow_id: str,
        verb: str,
        actor: str,
        reason: str | None = None,
        params: dict[str, Any] | None = None,
        *,
        checked: bool = False,
        expected_status: str | None = None,
    ) -> Outcome:
        """One outside verb on one run (pgbus.workflow_command): its answer, or a refusal for
        input SQL rejects with an error (a payload over the size limit, a reason too long).
        checked=True (a caller that read the run first, as the MCP write tools do) goes through
        pgbus.workflow_command_expecting: the status it read (expected_status) and the run's
        available actions are checked again under the run's row lock. A verb that was done
        emits its instrumentation (pgbus.workflow.runs.emit_command) once it has committed."""
        fn = "workflow_command_expecting" if checked else "workflow_command"
        expecting = ", expected_status => %(expected)s" if checked else ""
        try:
            with self._conn() as conn:
                row = conn.execute(
                    f"SELECT pgbus.{fn}(workflow_id => %(id)s::uuid, verb => %(verb)s,"
                    f" actor => %(actor)s, reason => %(reason)s, params => %(params)s{expecting})"
                    " AS outcome, (SELECT r.workflow_class FROM pgbus.workflow_runs_overview r"
                    " WHERE r.workflow_id = %(id)s::uuid) AS workflow_class",
                    {
                        "id": workflow_id,
                        "verb": verb,
                        "actor": actor,
                        "reason": reason,
                        "params": Jsonb(params or {}),
                        "expected": expected_status,
                    },
                ).fetchone()
        except psycopg.Error as exc:
            return _refusal(exc)
        outcome = row["outcome"]
        # The pool's connections autocommit: the verb has committed by now.
        if outcome.get("ok") and row["workflow_class"] is not None:
            _instrument(row["workflow_class"], workflow_id, verb, params, outcome, actor)
        return outcome

    def workflow_attention_act(
        self, verb: str, group: dict[str, Any], actor: str, reason: str | None = None
    ) -> Outcome:
        """Resume or cancel up to 500 runs of one attention group
        (pgbus.workflow_attention_act_runs); each run it acted on emits the instrumentation of
        the same verb on that run alone, once the whole call has committed."""
        try:
            with self._conn() as conn:
                outcome = conn.execute(
                    "SELECT pgbus.workflow_attention_act_runs(verb => %s, workflow_class => %s,"
                    " step_name => %s, reason => %s, error_class => %s, actor => %s, why => %s,"
                    " max_runs => %s, stall_threshold => %s, overdue_after => %s,"
                    " waiting_threshold => %s) AS outcome",
                    (
                        verb,
                        group.get("workflow_class"),
                        group.get("step_name"),
                        group.get("reason"),
                        group.get("error_class"),
                        actor,
                        reason,
                        WORKFLOW_BULK_LIMIT,
                        *self._workflow_thresholds(),
                    ),
                ).fetchone()["outcome"]
        except psycopg.Error as exc:
            return _refusal(exc)
        for run in outcome.pop("runs", None) or ():
            _instrument(
                run["workflow_class"],
                run["workflow_id"],
                verb,
                None,
                {"ok": True, "status": run["status"]},
                actor,
            )
        return outcome

    # -- actions -------------------------------------------------------------------------

    def act(self, action: str, actor: str, **args: Any) -> Outcome:
        """Runs one operator action (a SQL function of ACTIONS) and returns its answer."""
        sql, names = ACTIONS[action]
        params = [_param(args.get(n)) for n in names]
        with self._conn() as conn:
            return conn.execute(sql, (*params, actor)).fetchone()["outcome"]


def _instrument(
    workflow_class: str,
    workflow_id: Any,
    verb: str,
    params: dict[str, Any] | None,
    outcome: Outcome,
    actor: str,
) -> None:
    """The events of an operator's verb that was done and committed: the ones the Python API
    emits for it (one place: pgbus.workflow.runs.emit_command). The verb stays done whatever
    happens here, so a failure is logged, never raised to the page or the MCP client."""
    from pgbus.workflow.runs import emit_command

    try:
        emit_command(workflow_class, workflow_id, verb, params, outcome, actor)
    except Exception:
        log.exception("instrumentation of %s on workflow %s failed", verb, workflow_id)


def _times(row: dict[str, Any], keys: tuple[str, ...]) -> None:
    for k in keys:
        if isinstance(row.get(k), str):
            row[k] = datetime.fromisoformat(row[k])


def _refusal(exc: psycopg.Error) -> Outcome:
    """Input SQL refused with an error (never its text: the page gets a plain sentence)."""
    code = getattr(exc, "sqlstate", None)
    if code == "PB413":
        return {"ok": False, "code": "too_large", "message": "Not done: the payload is too large"}
    if code in ("22023", "22P02", "22001"):
        return {"ok": False, "code": "invalid", "message": "Not done: the input was refused"}
    raise exc


def _param(v: Any) -> Any:
    if isinstance(v, list | dict):
        return Jsonb(v)
    return v


# action name -> (statement, argument names in order; the actor comes last)
ACTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "recurring_task_toggle": (
        "SELECT pgbus.recurring_task_toggle(task_key => %s, enabled => %s, actor => %s) AS outcome",
        ("task_key", "enabled"),
    ),
    "recurring_task_run_now": (
        "SELECT pgbus.recurring_task_run_now(task_key => %s, actor => %s) AS outcome",
        ("task_key",),
    ),
    "deploy_task_toggle": (
        "SELECT pgbus.deploy_task_toggle(task_key => %s, enabled => %s, actor => %s) AS outcome",
        ("task_key", "enabled"),
    ),
    "deploy_task_run_now": (
        "SELECT pgbus.deploy_task_run_now_by(task_key => %s, actor => %s) AS outcome",
        ("task_key",),
    ),
    "queue_pause": (
        "SELECT pgbus.queue_pause(queue => %s, reason => %s, actor => %s) AS outcome",
        ("queue", "reason"),
    ),
    "queue_resume": ("SELECT pgbus.queue_resume(queue => %s, actor => %s) AS outcome", ("queue",)),
    "queue_purge": ("SELECT pgbus.queue_purge(queue => %s, actor => %s) AS outcome", ("queue",)),
    "queue_delete": ("SELECT pgbus.queue_delete(queue => %s, actor => %s) AS outcome", ("queue",)),
    "message_retry": (
        "SELECT pgbus.message_retry(queue => %s, msg_id => %s::bigint, actor => %s) AS outcome",
        ("queue", "msg_id"),
    ),
    "message_discard": (
        "SELECT pgbus.message_discard(queue => %s, msg_id => %s::bigint, actor => %s) AS outcome",
        ("queue", "msg_id"),
    ),
    "messages_retry": (
        "SELECT pgbus.messages_retry(items => %s, actor => %s) AS outcome",
        ("items",),
    ),
    "messages_discard": (
        "SELECT pgbus.messages_discard(items => %s, actor => %s) AS outcome",
        ("items",),
    ),
    "jobs_discard_enqueued": (
        "SELECT pgbus.jobs_discard_enqueued(queue => %s, max_items => %s, actor => %s) AS outcome",
        ("queue", "limit"),
    ),
    "event_replay": (
        "SELECT pgbus.event_replay(queue => %s, msg_id => %s::bigint, actor => %s) AS outcome",
        ("queue", "msg_id"),
    ),
    "event_mark_handled": (
        "SELECT pgbus.event_mark_handled(queue => %s, msg_id => %s::bigint,"
        " handlers => ARRAY(SELECT jsonb_array_elements_text(%s)), actor => %s) AS outcome",
        ("queue", "msg_id", "handlers"),
    ),
    "event_edit_payload": (
        "SELECT pgbus.event_edit_payload(queue => %s, msg_id => %s::bigint, payload => %s, actor => %s)"
        " AS outcome",
        ("queue", "msg_id", "payload"),
    ),
    "event_reroute": (
        "SELECT pgbus.event_reroute(queue => %s, msg_id => %s::bigint, target => %s, actor => %s)"
        " AS outcome",
        ("queue", "msg_id", "target"),
    ),
    "dead_letter_retry": (
        "SELECT pgbus.dead_letter_retry(queue => %s, msg_id => %s::bigint, actor => %s) AS outcome",
        ("queue", "msg_id"),
    ),
    "dead_letters_retry": (
        "SELECT pgbus.dead_letters_retry(items => %s, actor => %s) AS outcome",
        ("items",),
    ),
    "dead_letters_retry_all": (
        "SELECT pgbus.dead_letters_retry_all(max_items => %s, actor => %s) AS outcome",
        ("limit",),
    ),
    "dead_letters_discard_all": (
        "SELECT pgbus.dead_letters_discard_all(max_items => %s, actor => %s) AS outcome",
        ("limit",),
    ),
}


def is_database_error(exc: BaseException) -> bool:
    return isinstance(exc, psycopg.Error)

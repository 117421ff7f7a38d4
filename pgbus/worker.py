"""The worker: reads PGMQ, runs job bodies on threads, reports each outcome to SQL.

A job that uses the database (`self.conn`, or enqueueing) runs in a transaction on its own
connection, and `pgbus.job_succeeded` (archive, batch counter, stats) commits in that same
transaction: the job's writes and its completion land together or not at all. When the message
turns out to be finished already (it was redelivered while this run was slow), the run's
writes roll back. A job that never touches the database completes in one statement.

Reads are sized to the free threads and wake on PGMQ's insert notifications, with polling as
the fallback. A visibility heartbeat keeps running jobs' messages invisible. SIGTERM stops
reading and lets running jobs finish within `drain_timeout`; a second signal exits at once.
While the database is unreachable the worker tries again every RECONNECT_DELAY (logged once
when the outage starts and once when it ends), and a stop never waits on the database for
longer than a couple of seconds.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import math
import os
import queue
import signal
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from pgbus import queues
from pgbus.commit_hooks import run_hooks
from pgbus.config import configure, settings
from pgbus.db import (
    CONNECT_TIMEOUT,
    RECONNECT_DELAY,
    SHORT_WAIT,
    connect,
    is_connection_error,
    pool,
    reachability,
)
from pgbus.errors import RetriesExhausted
from pgbus.instrumentation import emit, instrument
from pgbus.jobs import (
    Job,
    JobTransaction,
    current_transaction,
    job_class,
    retry_policy,
    running_job,
)
from pgbus.migrate import require_migration
from pgbus.processes import ProcessRecord, orphaned, orphaned_reason
from pgbus.reporting import error_record, report_error
from pgbus.serialization import load_arguments

log = logging.getLogger("pgbus.worker")
BACKTRACE_LINES = 50
MESSAGE_GONE = "PB001"  # pgbus.job_succeeded(..., raise_if_gone => true): finished by another run
ENDING = object()  # (in _execute's `taken`: this thread is ending a step, see Worker._ending)


@dataclasses.dataclass(frozen=True)
class Ack:
    """A finished job that did not use the database, waiting to be acknowledged in bulk."""

    delivery: Delivery
    started: float
    duration_ms: int
    latency_ms: int


@dataclasses.dataclass(frozen=True)
class Delivery:
    """One read of one message."""

    queue: str
    msg_id: int
    read_ct: int
    enqueued_at: datetime
    message: Any  # a JSON object for anything pgbus sent; whatever was written otherwise
    step: dict[str, Any] | None = None  # a workflow step's attempt, begun at read time
    headers: dict[str, Any] | None = None  # (read by consumers only)

    @property
    def fields(self) -> dict[str, Any]:
        return self.message if isinstance(self.message, dict) else {}

    @property
    def job_name(self) -> str:
        return str(self.fields.get("job_class", "(none)"))

    def context(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "job_class": self.job_name,
            "msg_id": self.msg_id,
            "read_ct": self.read_ct,
            "job_id": self.fields.get("job_id"),
        }


class Worker:
    kind = "worker"  # (its row in pgbus.processes)
    required_migration = "0002_jobs"

    def __init__(self, queue_names: list[str], threads: int = 5) -> None:
        if threads < 1:
            raise ValueError("a worker needs at least one thread")
        self.read_queues = queues.read_order(queue_names)
        self.threads = threads
        self.identity = f"{socket.gethostname()}:{os.getpid()}"
        self.revision = settings().revision()  # a process's code does not change while it runs
        # Messages held at once: one running per thread plus one waiting per thread, so a
        # thread that finishes finds its next job without a round trip to the database.
        self.capacity = 2 * threads
        s = settings()
        self.vt = max(1, math.ceil(s.visibility_timeout.total_seconds()))
        self.poll_seconds = s.polling_interval.total_seconds()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._in_flight: dict[tuple[str, int], Delivery] = {}
        self._reader_conn: psycopg.Connection | None = None
        self._acks: queue.SimpleQueue[Ack] = queue.SimpleQueue()
        self._unstarted: list[Delivery] = []  # read ahead, cancelled at shutdown
        # Read ahead, waiting for a thread, in reading order. Each submitted task runs the
        # first one; a thread ending a workflow step may take the next step itself (its end
        # marks that step's body started, saving it a transaction of its own).
        self._pending: collections.deque[Delivery] = collections.deque()
        self._executing = 0  # threads running a job now
        # ... of them, threads ending a workflow step with nothing read ahead to take next: free
        # within a round trip, so a read now starts its next step at once.
        self._ending = 0
        self.processed = 0
        self.failed = 0
        # Every thread holds a connection while its job runs; one more each for reads and beats.
        if s.pool_size < threads + 2:
            configure(pool_size=threads + 2)
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="pgbus-job")

    # -- lifecycle -----------------------------------------------------------------------

    def run(self) -> int:
        """Runs until stopped; 0 when every running job finished, 2 when the drain timed out
        (the jobs still running cannot be stopped: `pgbus worker` then exits at once)."""
        with connect(timeout=CONNECT_TIMEOUT) as c:  # (fails fast, with its cause, on one line)
            require_migration(c, self.required_migration)
            self._prepare(c)
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_signal)
            signal.signal(signal.SIGINT, self._on_signal)
        record = ProcessRecord(self.kind, self._metadata)
        record.start()
        helpers = [
            threading.Thread(target=self._keep_visible, name="pgbus-visibility", daemon=True),
            threading.Thread(target=self._acknowledge, name="pgbus-acknowledge", daemon=True),
        ]
        if settings().listen_notify:
            helpers.append(threading.Thread(target=self._listen, name="pgbus-listen", daemon=True))
        for t in helpers:
            t.start()
        log.info(
            "%s started: queues %s, %d threads",
            self.kind,
            ", ".join(self.read_queues),
            self.threads,
        )
        try:
            self._loop()
            drained = self._drain()
        finally:
            self._closed.set()
            self._close_reader()
            record.stop()
        return 0 if drained else 2

    def _prepare(self, conn: psycopg.Connection) -> None:
        """Set-up before the first read, on the start-up connection (consumers bind topics)."""

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()

    def _on_signal(self, signum: int, _frame: Any) -> None:
        if self._stopping.is_set():
            log.warning(
                "second signal: exiting now; running jobs return after the visibility timeout"
            )
            os._exit(1)
        log.info("signal %d: finishing running jobs (at most %s)", signum, settings().drain_timeout)
        self.stop()

    def _drain(self) -> bool:
        self._release_unstarted()
        deadline = time.monotonic() + settings().drain_timeout.total_seconds()
        while self._in_flight and time.monotonic() < deadline:
            self._wake.wait(0.05)
            self._wake.clear()
        self._executor.shutdown(wait=not self._in_flight)
        if self._in_flight:
            log.warning("%d jobs still running after the drain timeout", len(self._in_flight))
            return False
        log.info("worker stopped: %d jobs processed, %d failed", self.processed, self.failed)
        return True

    def _release_unstarted(self) -> None:
        """Jobs read ahead but not started go back to the queue at once for other workers
        (with the database unreachable, they come back after the visibility timeout)."""
        self._executor.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            self._unstarted.extend(self._pending)
            self._pending.clear()
        if not self._unstarted:
            return
        by_queue: dict[str, list[int]] = {}
        for d in self._unstarted:
            by_queue.setdefault(d.queue, []).append(d.msg_id)
        # Workflow step attempts begun when read go back to scheduled, not left to look stalled.
        steps = [d.step["step_id"] for d in self._unstarted if d.step and "step_id" in d.step]
        try:
            if reachability.down:
                raise psycopg.OperationalError("the database is unreachable")
            with pool().connection(timeout=SHORT_WAIT) as c, c.transaction():
                if steps:
                    c.execute(
                        "SELECT pgbus.workflow_release_steps(%s::bigint[], %s)",
                        (steps, self.identity),
                    )
                for q, ids in by_queue.items():
                    c.execute("SELECT count(*) FROM pgmq.set_vt(%s, %s::bigint[], 0)", (q, ids))
        except psycopg.Error as exc:  # they come back after the visibility timeout instead
            if is_connection_error(exc):
                log.warning(
                    "could not release %d jobs that had not started (%s): they come back"
                    " after the visibility timeout",
                    len(self._unstarted),
                    exc,
                )
            else:
                report_error(exc, {"action": "release_unstarted"})
        for d in self._unstarted:
            self._finished(d)
        if self._unstarted:
            log.info("released %d jobs that had not started", len(self._unstarted))

    def _metadata(self) -> dict[str, Any]:
        return {
            "queues": self.read_queues,
            "threads": self.threads,
            "in_flight": len(self._in_flight),
            "jobs_processed": self.processed,
            "jobs_failed": self.failed,
        }

    # -- reading -------------------------------------------------------------------------

    def _loop(self) -> None:
        backoff = RECONNECT_DELAY
        while not self._stopping.is_set():
            self._wake.clear()
            free = self.capacity - len(self._in_flight)
            got = 0
            if free > 0:
                try:
                    deliveries = self._read(free)
                except psycopg.Error as exc:
                    if is_connection_error(exc):
                        # Tried again soon whatever the outage's length: work resumes within a
                        # moment of the server's return.
                        reachability.failed(exc, "fetch_messages")
                        self._stopping.wait(RECONNECT_DELAY)
                        continue
                    if backoff == RECONNECT_DELAY:
                        report_error(exc, {"action": "fetch_messages", "queues": self.read_queues})
                    self._stopping.wait(backoff)
                    backoff = min(backoff * 2, 10.0)
                    continue
                backoff = RECONNECT_DELAY
                reachability.ok()
                for d in deliveries:
                    if d.step and d.step.get("stalled"):
                        self._stall_detected(d)
                    elif d.step and d.step.get("held"):
                        self._held(d)
                    elif d.step and d.step.get("concluded"):
                        concluded_at_begin(d.step)
                    else:
                        self._submit(d)
                got = len(deliveries)
            if free == 0 or got < free:
                self._wake.wait(self.poll_seconds)
            if orphaned():
                log.warning("worker: %s", orphaned_reason())
                self.stop()

    def _read(self, qty: int) -> list[Delivery]:
        started = time.monotonic()
        try:
            rows = self._reader().execute(*self._read_query(qty)).fetchall()
        except psycopg.Error:
            self._close_reader()
            raise
        emit(
            "pgbus.client.read_batch",
            queue=",".join(self.read_queues),
            qty=qty,
            count=len(rows),
            duration=time.monotonic() - started,
        )
        return [Delivery(*r) for r in rows]

    def _read_query(self, qty: int) -> tuple[str, tuple[Any, ...]]:
        """The statement that reads up to `qty` messages (its rows make Deliveries)."""
        return (
            "SELECT queue, msg_id, read_ct, enqueued_at, message, context"
            " FROM pgbus.read_jobs(%s, %s, %s, %s, %s, %s, %s)",
            (
                self.read_queues,
                self.vt,
                qty,
                self.identity,
                self.revision,
                settings().workflow_stall_action,
                self._idle_threads(),
            ),
        )

    def _reader(self) -> psycopg.Connection:
        """The main loop's own connection. Its commits do not wait for the disk: a read lost in
        a crash only makes its messages visible again, which at-least-once delivery allows."""
        if self._reader_conn is None or self._reader_conn.closed:
            self._reader_conn = psycopg.connect(
                settings().dsn(),
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT,
                options="-c synchronous_commit=off",
            )
        return self._reader_conn

    def _close_reader(self) -> None:
        if self._reader_conn is not None:
            self._reader_conn.close()
            self._reader_conn = None

    def _listen(self) -> None:
        """Wakes the loop on every insert notification of our queues; reconnects on failure."""
        channels = [f"pgmq.q_{q}.INSERT" for q in self.read_queues]
        while not self._closed.is_set():
            try:
                with psycopg.connect(
                    settings().dsn(), autocommit=True, connect_timeout=CONNECT_TIMEOUT
                ) as c:
                    for ch in channels:
                        c.execute(sql.SQL("LISTEN {}").format(sql.Identifier(ch)))
                    self._wake.set()  # (what was sent while it was away is read now)
                    while not self._closed.is_set():
                        for _ in c.notifies(timeout=1.0):
                            self._wake.set()
            except psycopg.Error as exc:
                # (The reads poll meanwhile; an outage is the read loop's to log.)
                log.debug("notification listener lost its connection: %s", exc)
                self._closed.wait(RECONNECT_DELAY)

    def _keep_visible(self) -> None:
        """The visibility heartbeat: running jobs' messages stay invisible while they run."""
        every = max(self.vt / 3, 0.5)
        while not self._closed.wait(every):
            with self._lock:
                by_queue: dict[str, list[int]] = {}
                for q, msg_id in self._in_flight:
                    by_queue.setdefault(q, []).append(msg_id)
            if not by_queue:
                continue
            try:
                with pool().connection(timeout=SHORT_WAIT) as c:
                    for q, ids in by_queue.items():
                        c.execute(
                            "SELECT pgbus.extend_visibility(%s, %s::bigint[], %s)",
                            (q, ids, self.vt),
                        )
            except psycopg.Error as exc:
                if is_connection_error(exc):
                    reachability.failed(exc, "extend_visibility")
                else:
                    report_error(exc, {"action": "extend_visibility"})

    # -- running -------------------------------------------------------------------------

    def _idle_threads(self) -> int:
        """Threads that would start a message read now at once: the read marks that many
        workflow steps' bodies as started; the rest are read ahead (marked when they start)."""
        with self._lock:
            return max(0, self.threads - self._executing + self._ending - len(self._pending))

    def _submit(self, d: Delivery) -> None:
        with self._lock:
            self._in_flight[(d.queue, d.msg_id)] = d
            self._pending.append(d)
        self._executor.submit(self._run_pending)

    def _run_pending(self) -> None:
        with self._lock:
            if not self._pending:
                return  # (a thread ending a step took it)
            d: Delivery | None = self._pending.popleft()
        while d is not None:
            d = self._execute(d)

    def _reserve_next_step(self) -> Delivery | None:
        """The next read-ahead delivery, when it is a workflow step whose body has not been
        marked started: the calling thread runs it next, and marks it with its own step's end."""
        with self._lock:
            if self._stopping.is_set() or not self._pending:
                return None
            nxt = self._pending[0]
            if not nxt.step or "step_id" not in nxt.step or nxt.step.get("body_started", True):
                return None
            return self._pending.popleft()

    def _finished(self, d: Delivery) -> None:
        with self._lock:
            self._in_flight.pop((d.queue, d.msg_id), None)
        self._wake.set()

    def _execute(self, d: Delivery) -> Delivery | None:
        """Runs one delivery; answers the next one this thread took to run (see
        _reserve_next_step), if any."""
        started = time.monotonic()
        latency_ms = self._latency_ms(d)
        cls: type[Job] | None = None
        acknowledged_later = False
        taken: list[Any] = []
        after: list[Callable[[], Any]] = []  # run once the execution's event went out
        with self._lock:
            self._executing += 1
        try:
            # One timed event for the whole execution, from before the message is decoded to
            # its outcome: a tracer's span (pgbus.otel) is current throughout, and records the
            # exception that ended it (also one handled here: it fails the attempt).
            name, payload = self._execution_event(d)
            with instrument(name, **payload) as execution:
                try:
                    cls = self._job_class(d)
                    # (A workflow step's redeliveries are the stall logic's, not this gate's.)
                    if d.step is None and d.read_ct > retry_policy(cls)["max_retries"] + 1:
                        self._dead_letter_unrun(d)
                        return None
                    args, kwargs = self._arguments(d)
                    acknowledged_later = self._run(
                        cls, d, args, kwargs, started, latency_ms, taken, execution, after
                    )
                except Exception as exc:
                    execution["exception"], execution["error"] = exc, type(exc).__name__
                    self._failed(d, cls, exc, started)
            for fn in after:
                fn()
        finally:
            with self._lock:
                self._executing -= 1
                if ENDING in taken:
                    self._ending -= 1
            if not acknowledged_later:
                self._finished(d)
        return next((t for t in taken if t is not ENDING), None)

    def _execution_event(self, d: Delivery) -> tuple[str, dict[str, Any]]:
        """The name and payload of the timed event around one execution."""
        payload = {**d.context(), "enqueued_at": d.enqueued_at}
        if d.step:
            payload.update(
                workflow_class=d.step.get("workflow_class"),
                workflow_id=d.step.get("workflow_id"),
                step=d.step.get("step_name"),
                attempt=d.step.get("attempt"),
            )
        return "pgbus.executor.execute", payload

    def _job_class(self, d: Delivery) -> type[Job]:
        return job_class(d.job_name)

    def _arguments(self, d: Delivery) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return load_arguments(d.message)

    def _run(
        self,
        cls: type[Job],
        d: Delivery,
        args: tuple,
        kwargs: dict,
        started: float,
        latency_ms: int,
        taken: list[Any],
        execution: dict[str, Any] | None = None,
        after: list[Callable[[], Any]] | None = None,
    ) -> bool:
        """Runs the job; True when its completion went to the bulk acknowledger. A workflow
        step may take the next read-ahead step for this thread: it goes into `taken`."""
        job = cls()
        job.step_context = d.step
        job.msg_id, job.read_ct, job.enqueued_at = d.msg_id, d.read_ct, d.enqueued_at
        job.job_id = d.fields.get("job_id", "")
        if d.step is not None:

            def reserve() -> Delivery | None:
                nxt = self._reserve_next_step()
                if nxt is not None:
                    taken.append(nxt)
                else:
                    with self._lock:
                        self._ending += 1
                    taken.append(ENDING)
                return nxt

            job.reserve_next = reserve
            job.give_up = self._closed.is_set
            job.worker_identity = self.identity
            job.queue_name = d.queue
        try:
            with ExitStack() as stack:
                job.transaction = JobTransaction(stack)
                token = current_transaction.set(job.transaction)
                job_token = running_job.set(job)
                try:
                    job.perform(*args, **kwargs)
                finally:
                    running_job.reset(job_token)
                    current_transaction.reset(token)
                failure = getattr(job, "body_exception", None)  # (a step's, dealt with)
                if execution is not None and isinstance(failure, BaseException):
                    execution["exception"], execution["error"] = failure, type(failure).__name__
                if not job.acknowledged:  # (a workflow step records its own end)
                    if not job.transaction.begun:
                        self._acks.put(Ack(d, started, self._ms_since(started), latency_ms))
                        return True
                    job.conn.execute(
                        "SELECT pgbus.job_succeeded(%s, %s::bigint, %s, %s, %s, true)",
                        (
                            d.queue,
                            d.msg_id,
                            self._ms_since(started),
                            latency_ms,
                            settings().stats_enabled,
                        ),
                    )
        except Exception as exc:
            if isinstance(exc, psycopg.Error) and exc.sqlstate == MESSAGE_GONE:
                self._finished_elsewhere(d)
                return False
            if not job.recover(exc):  # (its transaction rolled back)
                raise
            if execution is not None:  # (a step's failure, dealt with: it still ended the run)
                execution["exception"], execution["error"] = exc, type(exc).__name__
            return False
        if taken and getattr(job, "next_marked", False):  # committed with this step's end
            taken[0].step["body_started"] = True  # type: ignore[index]
        # (After the execution's event, as before it had a start: its commit hooks, then the
        # completion's event.)
        hooks = job.transaction.commit_hooks

        def complete() -> None:
            run_hooks(hooks)
            self._completed(d, started)

        if after is None:
            complete()
        else:
            after.append(complete)
        return False

    def _acknowledge(self) -> None:
        """Completes, in bulk, the jobs that did not use the database: one statement per queue
        for every completion waiting, instead of one transaction each."""
        while True:
            try:
                acks = [self._acks.get(timeout=0.2)]
            except queue.Empty:
                if self._closed.is_set():
                    return
                continue
            while len(acks) < 1000:
                try:
                    acks.append(self._acks.get_nowait())
                except queue.Empty:
                    break
            by_queue: dict[str, list[Ack]] = {}
            for a in acks:
                by_queue.setdefault(a.delivery.queue, []).append(a)
            for q, items in by_queue.items():
                self._acknowledge_queue(q, items)

    def _acknowledge_queue(self, q: str, items: list[Ack]) -> None:
        try:
            with pool().connection() as c:
                done = {
                    row[0]
                    for row in c.execute(
                        "SELECT * FROM pgbus.jobs_succeeded(%s, %s::bigint[], %s::integer[],"
                        " %s::bigint[], %s)",
                        (
                            q,
                            [a.delivery.msg_id for a in items],
                            [a.duration_ms for a in items],
                            [a.latency_ms for a in items],
                            settings().stats_enabled,
                        ),
                    )
                }
        except psycopg.Error as exc:
            # Their messages come back after the visibility timeout and run again.
            if is_connection_error(exc):
                reachability.failed(exc, "acknowledge_jobs")
            else:
                report_error(exc, {"action": "acknowledge_jobs", "queue": q, "count": len(items)})
            done = None
        for a in items:
            if done is not None and a.delivery.msg_id in done:
                self._completed(a.delivery, a.started)
            elif done is not None:
                self._finished_elsewhere(a.delivery)
            self._finished(a.delivery)

    def _completed(self, d: Delivery, started: float) -> None:
        with self._lock:
            self.processed += 1
        emit("pgbus.job_completed", **d.context(), duration=time.monotonic() - started)

    def _held(self, d: Delivery) -> None:
        """A step message of ours came back (our visibility heartbeat lapsed, say while the
        database was away). Still running here: the read hid it again. Lost track of: its
        attempt goes back to scheduled and the message runs again."""
        with self._lock:
            if (d.queue, d.msg_id) in self._in_flight:
                return
        s = d.step or {}
        try:
            with pool().connection() as c, c.transaction():
                c.execute(
                    "SELECT pgbus.workflow_release_steps(%s::bigint[], %s)",
                    ([s["step_id"]], self.identity),
                )
                c.execute(
                    "SELECT count(*) FROM pgmq.set_vt(%s, %s::bigint[], 0)", (d.queue, [d.msg_id])
                )
        except psycopg.Error as exc:  # it comes back after the visibility timeout
            report_error(exc, {"action": "release_held_step", **d.context()})

    @staticmethod
    def _stall_detected(d: Delivery) -> None:
        """A workflow step delivered again while its attempt ran: its worker died. SQL applied
        the stall action when it read the message."""
        s = d.step or {}
        log.warning(
            "workflow %s step %s: its worker died; %s applied",
            s.get("workflow_id"),
            s.get("step_name"),
            s.get("action"),
        )
        emit(
            "pgbus.workflow.stall_detected",
            workflow_class=s.get("workflow_class"),
            workflow_id=s.get("workflow_id"),
            step=s.get("step_name"),
            detection="redelivery",
            action=s.get("action"),
        )
        # The run's own event when the stall action moved it (not when it was paused already).
        if s.get("status") != s.get("was", "running"):
            from pgbus.workflow.runs import emit_status

            emit_status(
                str(s.get("workflow_class")),
                str(s.get("workflow_id")),
                str(s.get("status")),
                "pgbus",
                "pgbus.StepStalled",
            )

    @staticmethod
    def _finished_elsewhere(d: Delivery) -> None:
        log.info(
            "job %s (msg %s) was finished by another run; this run's writes rolled back",
            d.job_name,
            d.msg_id,
        )

    def _failed(self, d: Delivery, cls: type[Job] | None, exc: Exception, started: float) -> None:
        with self._lock:
            self.failed += 1
        report_error(exc, {"action": "execute_job", **d.context()})
        error = error_record(exc, BACKTRACE_LINES)
        try:
            with pool().connection() as c:
                outcome = c.execute(
                    "SELECT pgbus.job_failed(%s, %s::bigint, %s, %s, %s, %s)",
                    (
                        d.queue,
                        d.msg_id,
                        Jsonb(error),
                        Jsonb(retry_policy(cls)),
                        self._ms_since(started),
                        settings().stats_enabled,
                    ),
                ).fetchone()[0]
        except psycopg.Error as db_exc:
            report_error(db_exc, {"action": "record_failure", **d.context()})
            return
        self._announce_failure(d, exc, error["class"], outcome)

    def _announce_failure(self, d: Delivery, exc: Exception, error: str, outcome: str) -> None:
        """The events of a failed attempt, once its outcome is recorded."""
        emit("pgbus.job_failed", **d.context(), error=error, exception=exc)
        if outcome == "dead_lettered":
            emit("pgbus.job_dead_lettered", **d.context(), error=error)

    def _dead_letter_unrun(self, d: Delivery) -> None:
        """Delivered more times than it may run: each earlier run died with its worker."""
        error = {
            "class": RetriesExhausted.error_name,
            "message": f"delivered {d.read_ct} times without finishing (its worker died each time)",
        }
        with pool().connection() as c:
            moved = c.execute(
                "SELECT pgbus.dead_letter(%s, %s::bigint, %s, %s)",
                (d.queue, d.msg_id, Jsonb(error), settings().stats_enabled),
            ).fetchone()[0]
        if moved:
            emit("pgbus.job_dead_lettered", **d.context(), error=error["class"])

    @staticmethod
    def _ms_since(started: float) -> int:
        return int((time.monotonic() - started) * 1000)

    @staticmethod
    def _latency_ms(d: Delivery) -> int:
        scheduled = d.fields.get("scheduled_at")
        since = datetime.fromisoformat(scheduled) if scheduled else d.enqueued_at
        return max(0, int((datetime.now(UTC) - since).total_seconds() * 1000))


def concluded_at_begin(context: dict[str, Any]) -> None:
    """A step message that SQL ended when it was read, without running it: a step the
    definition no longer has (the run paused with StepNotDefined: reported) or a gravestone
    (skipped). The run's event goes out when its status changed."""
    from pgbus.workflow.errors import StepNotDefined
    from pgbus.workflow.runs import emit_status

    error = context.get("error") or None
    if error is not None:
        log.warning(
            "workflow %s step %s: %s; the run is paused",
            context.get("workflow_id"),
            context.get("step_name"),
            error.get("message"),
        )
        report_error(
            StepNotDefined(error.get("message")),
            {
                "action": "workflow_begin_step",
                "workflow_id": context.get("workflow_id"),
                "workflow_class": context.get("workflow_class"),
                "step": context.get("step_name"),
                "attempt": context.get("attempt"),
            },
        )
    if context.get("status") != context.get("was"):
        emit_status(
            str(context.get("workflow_class")),
            str(context.get("workflow_id")),
            str(context.get("status")),
            "pgbus",
            (error or {}).get("class"),
        )

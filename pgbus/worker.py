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
    UnknownJobClass,
    current_transaction,
    end_overdue,
    job_class,
    releasing_lost_reads,
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
    context: dict[str, Any] | None = None  # what the read answered beside it (a step's attempt)
    headers: dict[str, Any] | None = None  # (read by consumers only)

    @property
    def fields(self) -> dict[str, Any]:
        return self.message if isinstance(self.message, dict) else {}

    @property
    def job_name(self) -> str:
        return str(self.fields.get("job_class", "(none)"))

    def log_context(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "job_class": self.job_name,
            "msg_id": self.msg_id,
            "read_ct": self.read_ct,
            "job_id": self.fields.get("job_id"),
        }


_identities = threading.Lock()
_workers_in_process: dict[int, int] = {}  # pid -> Worker objects made in it


def _identity() -> str:
    """host:pid for a process's first worker (its pgbus.processes row names it so), host:pid#2,
    #3 ... for more in the same process: a step's attempt names the worker that holds it, and
    the steps one worker begins, hands back or takes back must not be another's."""
    pid = os.getpid()
    with _identities:
        n = _workers_in_process[pid] = _workers_in_process.get(pid, 0) + 1
    base = f"{socket.gethostname()}:{pid}"
    return base if n == 1 else f"{base}#{n}"


class Worker:
    kind = "worker"  # (its row in pgbus.processes)
    required_migration = "0002_jobs"

    def __init__(self, queue_names: list[str], threads: int = 5) -> None:
        if threads < 1:
            raise ValueError("a worker needs at least one thread")
        self.read_queues = queues.read_order(queue_names)
        self.threads = threads
        self.identity = _identity()
        self.revision = settings().revision()  # a process's code does not change while it runs
        # Messages held at once: one running per thread plus one waiting per thread, so a
        # thread that finishes finds its next job without a round trip to the database.
        self.capacity = 2 * threads
        # A busy worker reads again once fewer messages than this wait (several in one read).
        self.low_water = max(1, threads // 2)
        s = settings()
        self.vt = max(1, math.ceil(s.visibility_timeout.total_seconds()))
        self.poll_seconds = s.polling_interval.total_seconds()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._in_flight: dict[tuple[str, int], Delivery] = {}
        self._reader_conn: psycopg.Connection | None = None
        self._answer_lost = False  # a read failed on its connection (see _release_lost)
        self._acks: queue.SimpleQueue[Ack] = queue.SimpleQueue()
        self._unstarted: list[Delivery] = []  # read ahead, cancelled at shutdown
        # Messages held, not running yet, in reading order. `_ready`: runnable at once; one task
        # is submitted per entry and runs the first. `_ahead`: read ahead, their start still to
        # be recorded (Job.awaits_start: a workflow step's body). Recording it is never a
        # transaction of its own: a thread ending a step takes the first of `_ahead` and records
        # it with its end; a thread with nothing to run gets one recorded by the next read
        # (which also starts as many new steps as there are such threads).
        self._ready: collections.deque[Delivery] = collections.deque()
        self._ahead: collections.deque[Delivery] = collections.deque()
        self._busy = 0  # threads holding a delivery (running it, or ending it and taking the next)
        # ... of them, threads ending a workflow step with nothing read ahead to take next: free
        # within a round trip, so a read now starts (or marks) their next step at once.
        self._ending = 0
        self._in_end = 0  # threads ending a step: its message is done with, bar the commit
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
            self._unstarted.extend(self._ready)
            self._unstarted.extend(self._ahead)
            self._ready.clear()
            self._ahead.clear()
        if not self._unstarted:
            return
        by_queue: dict[str, list[int]] = {}
        by_class: dict[type[Job], list[Delivery]] = {}
        for d in self._unstarted:
            by_queue.setdefault(d.queue, []).append(d.msg_id)
            by_class.setdefault(self._hooks(d), []).append(d)
        try:
            if reachability.down:
                raise psycopg.OperationalError("the database is unreachable")
            with pool().connection(timeout=SHORT_WAIT) as c, c.transaction():
                for cls, held in by_class.items():
                    cls.release_unstarted(c, held, self.identity)
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
            free = self._free()
            got = 0
            idle, waiting, marking = self._plan_read()
            # A free thread reads at once; else the read waits until few messages are left
            # waiting, and then fetches several in one transaction instead of one per step end.
            if (
                self._answer_lost
                or marking
                or (free > 0 and (idle > 0 or waiting < self.low_water))
            ):
                try:
                    if self._answer_lost:
                        self._release_lost()
                    deliveries, marked = self._read(max(free, 0), idle - len(marking), marking)
                except psycopg.Error as exc:
                    with self._lock:
                        self._ahead.extendleft(reversed(marking))
                    if is_connection_error(exc):
                        # The read may have committed with its answer lost on the way: what it
                        # began here is handed back before the next read (_release_lost).
                        self._answer_lost = True
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
                self._marked(marking, marked)
                for d in deliveries:
                    try:
                        handled = self._hooks(d).on_read(self, d)
                    except Exception as exc:
                        report_error(exc, {"action": "on_read", **d.log_context()})
                        handled = True  # (its message comes back after the visibility timeout)
                    if not handled:
                        self._submit(d)
                got = len(deliveries)
            if free == 0 or got < free:
                self._wake.wait(self.poll_seconds)
            if orphaned():
                log.warning("worker: %s", orphaned_reason())
                self.stop()

    def _release_lost(self) -> None:
        """After a read whose connection failed: that read may have committed on the server
        (beginning workflow steps for this worker, their bodies marked started) while its
        answer never arrived. Whatever this worker began and does not hold goes back at once,
        instead of coming back after the visibility timeout looking like a dead worker's."""
        with self._lock:
            held = list(self._in_flight.values())
        try:
            released = sum(
                cls.release_lost(self._reader(), held, self.identity)
                for cls in releasing_lost_reads()
            )
        except psycopg.Error as exc:
            if is_connection_error(exc):
                self._close_reader()
                raise  # (still down: tried again before the next read)
            # (Not worth stopping the reads for: such steps come back as before, after the
            # visibility timeout.)
            report_error(exc, {"action": "release_lost_steps"})
            released = 0
        self._answer_lost = False
        if released:
            log.info("handed back %d steps begun by a read whose answer was lost", released)

    def _free(self) -> int:
        """Messages the worker can take now: held ones count, less those of steps being ended
        (their thread has taken its next one already)."""
        with self._lock:
            return self.capacity - len(self._in_flight) + self._in_end

    def _plan_read(self) -> tuple[int, int, list[Delivery]]:
        """Threads that would start a message now (free, or ending a step with nothing to take
        next, less the runnable messages waiting for them), and the read-ahead steps the next
        read marks started for them (taken out of `_ahead` while it runs)."""
        with self._lock:
            idle = max(0, self.threads - self._busy + self._ending - len(self._ready))
            marking = [self._ahead.popleft() for _ in range(min(idle, len(self._ahead)))]
            waiting = len(self._ready) + len(self._ahead)
        return idle, waiting, marking

    def _marked(self, marking: list[Delivery], marked: set[Any]) -> None:
        """Read-ahead deliveries whose start the read recorded run now; one it could not record
        (a workflow step no longer at that begin: stalled, released, begun again) does not
        run, and its message, if it is still there, comes back after the visibility timeout."""
        for d in marking:
            cls = self._hooks(d)
            ok = (cls, cls.start_key(d)) in marked
            cls.on_start_marked(d, ok)
            if ok:
                self._submit(d)
            else:
                self._finished(d)

    def _read(
        self, qty: int, start_now: int, marking: list[Delivery]
    ) -> tuple[list[Delivery], set[Any]]:
        """Reads up to `qty` messages (`_read_query`), the first `start_now` workflow steps
        among them started at once; in the same statement (one transaction), records the start
        of `marking`. Answers the deliveries and the (job class, start key) of each start
        recorded."""
        started = time.monotonic()
        query, params = self._read_query(qty, start_now)
        by_class: dict[type[Job], list[Delivery]] = {}
        for d in marking:
            by_class.setdefault(self._hooks(d), []).append(d)
        classes = list(by_class)
        marks = []
        for i, cls in enumerate(classes):  # (one row each, without a queue, before the reads)
            expression, own = cls.start_marks(by_class[cls])
            params = {**params, **{f"m{i}_{k}": v for k, v in own.items()}}
            expression = expression.replace("%(", f"%(m{i}_")
            marks.append(
                "SELECT NULL, NULL, NULL, NULL, NULL,"
                f" jsonb_build_object('marks', {i}, 'marked', to_jsonb({expression}))"
            )
        if marks:
            query = " UNION ALL ".join([*marks, query])
        try:
            rows = self._reader().execute(query, params).fetchall()
        except psycopg.Error:
            self._close_reader()
            raise
        marked = {
            (classes[r[5]["marks"]], key)
            for r in rows
            if r[0] is None
            for key in r[5]["marked"] or ()
        }
        rows = [r for r in rows if r[0] is not None]
        emit(
            "pgbus.client.read_batch",
            queue=",".join(self.read_queues),
            qty=qty,
            count=len(rows),
            duration=time.monotonic() - started,
        )
        return [Delivery(*r) for r in rows], marked

    def _read_query(self, qty: int, start_now: int) -> tuple[str, dict[str, Any]]:
        """The statement that reads up to `qty` messages (its rows make Deliveries; named
        parameters), the first `start_now` workflow steps among them started at once."""
        return (
            "SELECT queue, msg_id, read_ct, enqueued_at, message, context"
            " FROM pgbus.read_jobs(queues => %(queues)s, vt_seconds => %(vt)s, qty => %(qty)s,"
            " worker => %(worker)s, app_revision => %(revision)s,"
            " stall_action => %(stall_action)s, start_now => %(start_now)s)",
            {
                "queues": self.read_queues,
                "vt": self.vt,
                "qty": qty,
                "worker": self.identity,
                "revision": self.revision,
                "stall_action": settings().workflow_stall_action,
                "start_now": start_now,
            },
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
        """The visibility heartbeat: running jobs' messages stay invisible while they run, and
        transactions held open past their deadline are ended (jobs.end_overdue)."""
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
                    overdue = end_overdue(c)
                    if overdue:
                        log.warning(
                            "steps running past the stall threshold: %d; their transactions"
                            " ended (nothing they did commits)",
                            overdue,
                        )
                    for q, ids in by_queue.items():
                        c.execute(
                            "SELECT pgbus.extend_visibility(queue => %s,"
                            " msg_ids => %s::bigint[], vt_seconds => %s)",
                            (q, ids, self.vt),
                        )
            except psycopg.Error as exc:
                if is_connection_error(exc):
                    reachability.failed(exc, "extend_visibility")
                else:
                    report_error(exc, {"action": "extend_visibility"})

    # -- running -------------------------------------------------------------------------

    def holds(self, d: Delivery) -> bool:
        """Whether this worker holds (runs, or will run) the delivery's message."""
        with self._lock:
            return (d.queue, d.msg_id) in self._in_flight

    def _submit(self, d: Delivery) -> None:
        awaits = self._hooks(d).awaits_start(d)
        with self._lock:
            self._in_flight[(d.queue, d.msg_id)] = d
            if awaits:
                self._ahead.append(d)
                return
            self._ready.append(d)
        self._executor.submit(self._run_pending)

    def _run_pending(self) -> None:
        with self._lock:
            if not self._ready:
                return
            d: Delivery | None = self._ready.popleft()
            self._busy += 1
        while d is not None:
            d = self._execute(d)

    def _reserve_next(self) -> Delivery | None:
        """The delivery the calling thread runs next, taken while it ends a workflow step: a
        runnable one first (a step's body marked started already should start soonest), else
        the first read ahead, whose start that end records. None: the thread is free once its
        end commits (counted in `_ending` until then)."""
        with self._lock:
            self._in_end += 1
            nxt = None
            if self._stopping.is_set():
                pass
            elif self._ready:
                nxt = self._ready.popleft()
            elif self._ahead:
                nxt = self._ahead.popleft()
            if nxt is None:
                self._ending += 1
            return nxt

    def _finished(self, d: Delivery) -> None:
        with self._lock:
            self._in_flight.pop((d.queue, d.msg_id), None)
        self._wake.set()

    def _execute(self, d: Delivery) -> Delivery | None:
        """Runs one delivery; answers the next one this thread took to run (see
        _reserve_next), if any."""
        started = time.monotonic()
        latency_ms = self._latency_ms(d)
        cls: type[Job] | None = None
        acknowledged_later = False
        taken: list[Any] = []
        after: list[Callable[[], Any]] = []  # run once the execution's event went out
        try:
            # One timed event for the whole execution, from before the message is decoded to
            # its outcome: a tracer's span (pgbus.otel) is current throughout, and records the
            # exception that ended it (also one handled here: it fails the attempt).
            name, payload = self._execution_event(d)
            with instrument(name, **payload) as execution:
                try:
                    cls = self._job_class(d)
                    if (
                        cls.dead_letters_redeliveries
                        and d.read_ct > retry_policy(cls)["max_retries"] + 1
                    ):
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
            nxt = next((t for t in taken if t is not ENDING), None)
            with self._lock:
                if taken:
                    self._in_end -= 1
                if ENDING in taken:
                    self._ending -= 1
                if nxt is None:
                    self._busy -= 1  # (free now: the next read starts or marks a step for it)
            if not acknowledged_later:
                self._finished(d)
            elif nxt is None:
                self._wake.set()
        return nxt

    def _execution_event(self, d: Delivery) -> tuple[str, dict[str, Any]]:
        """The name and payload of the timed event around one execution."""
        payload = {**d.log_context(), "enqueued_at": d.enqueued_at}
        if d.context and "workflow_id" in d.context:  # (a workflow step's attempt)
            payload.update(
                workflow_class=d.context.get("workflow_class"),
                workflow_id=d.context.get("workflow_id"),
                step=d.context.get("step_name"),
                attempt=d.context.get("attempt"),
            )
        return "pgbus.executor.execute", payload

    def _job_class(self, d: Delivery) -> type[Job]:
        return job_class(d.job_name)

    def _hooks(self, d: Delivery) -> type[Job]:
        """The job class whose hooks apply to `d` (Job's own when its class is unknown here:
        it then fails when run, like any job)."""
        try:
            return self._job_class(d)
        except (UnknownJobClass, KeyError):
            return Job

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
        """Runs the job; True when its completion went to the bulk acknowledger. A job that
        records its own end may take the next delivery for this thread: it goes into `taken`."""
        job = cls()
        job.read_context = d.context
        job.msg_id, job.read_ct, job.enqueued_at = d.msg_id, d.read_ct, d.enqueued_at
        job.job_id = d.fields.get("job_id", "")
        job.queue_name, job.worker_identity = d.queue, self.identity
        job.give_up = self._closed.is_set

        def reserve() -> Delivery | None:
            nxt = self._reserve_next()
            taken.append(nxt if nxt is not None else ENDING)
            return nxt

        job.reserve_next = reserve
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
                        "SELECT pgbus.job_succeeded(queue => %(queue)s,"
                        " msg_id => %(msg_id)s::bigint, duration_ms => %(duration_ms)s,"
                        " latency_ms => %(latency_ms)s, record_stats => %(record_stats)s,"
                        " raise_if_gone => true)",
                        {
                            "queue": d.queue,
                            "msg_id": d.msg_id,
                            "duration_ms": self._ms_since(started),
                            "latency_ms": latency_ms,
                            "record_stats": settings().stats_enabled,
                        },
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
                        "SELECT * FROM pgbus.jobs_succeeded(queue => %(queue)s,"
                        " msg_ids => %(msg_ids)s::bigint[], durations_ms => %(durations)s::integer[],"
                        " latencies_ms => %(latencies)s::bigint[], record_stats => %(record_stats)s)",
                        {
                            "queue": q,
                            "msg_ids": [a.delivery.msg_id for a in items],
                            "durations": [a.duration_ms for a in items],
                            "latencies": [a.latency_ms for a in items],
                            "record_stats": settings().stats_enabled,
                        },
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
        emit("pgbus.job_completed", **d.log_context(), duration=time.monotonic() - started)

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
        report_error(exc, {"action": "execute_job", **d.log_context()})
        error = error_record(exc, BACKTRACE_LINES)
        try:
            with pool().connection() as c:
                outcome = c.execute(
                    "SELECT pgbus.job_failed(queue => %(queue)s, msg_id => %(msg_id)s::bigint,"
                    " error => %(error)s, policy => %(policy)s, duration_ms => %(duration_ms)s,"
                    " record_stats => %(record_stats)s)",
                    {
                        "queue": d.queue,
                        "msg_id": d.msg_id,
                        "error": Jsonb(error),
                        "policy": Jsonb(retry_policy(cls)),
                        "duration_ms": self._ms_since(started),
                        "record_stats": settings().stats_enabled,
                    },
                ).fetchone()[0]
        except psycopg.Error as db_exc:
            report_error(db_exc, {"action": "record_failure", **d.log_context()})
            return
        self._announce_failure(d, exc, error["class"], outcome)

    def _announce_failure(self, d: Delivery, exc: Exception, error: str, outcome: str) -> None:
        """The events of a failed attempt, once its outcome is recorded."""
        emit("pgbus.job_failed", **d.log_context(), error=error, exception=exc)
        if outcome == "dead_lettered":
            emit("pgbus.job_dead_lettered", **d.log_context(), error=error)

    def _dead_letter_unrun(self, d: Delivery) -> None:
        """Delivered more times than it may run: each earlier run died with its worker."""
        error = {
            "class": RetriesExhausted.error_name,
            "message": f"delivered {d.read_ct} times without finishing (its worker died each time)",
        }
        with pool().connection() as c:
            moved = c.execute(
                "SELECT pgbus.dead_letter(queue => %s, msg_id => %s::bigint, error => %s,"
                " record_stats => %s)",
                (d.queue, d.msg_id, Jsonb(error), settings().stats_enabled),
            ).fetchone()[0]
        if moved:
            emit("pgbus.job_dead_lettered", **d.log_context(), error=error["class"])

    @staticmethod
    def _ms_since(started: float) -> int:
        return int((time.monotonic() - started) * 1000)

    @staticmethod
    def _latency_ms(d: Delivery) -> int:
        scheduled = d.fields.get("scheduled_at")
        since = datetime.fromisoformat(scheduled) if scheduled else d.enqueued_at
        return max(0, int((datetime.now(UTC) - since).total_seconds() * 1000))

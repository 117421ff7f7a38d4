"""Jobs: a class with `perform`, or a decorated function, sent to a PGMQ queue.

    class SendReceipt(pgbus.Job):
        queue = "mail"
        def perform(self, order_id): ...

    SendReceipt.perform_later(42)
    SendReceipt.set(wait=timedelta(minutes=5), priority=0).perform_later(42)
    SendReceipt.perform_all_later([(1,), (2,)])  # one round trip

`conn=` joins the caller's transaction: nothing is visible before it commits, nothing at all on
rollback. Inside a running job, enqueues join the job's own transaction by default, so they
commit together with the job's completion.
"""

from __future__ import annotations

import contextvars
import dataclasses
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, TypeVar
from uuid import UUID

import psycopg
from psycopg.types.json import Jsonb

from pgbus import queues
from pgbus.config import settings
from pgbus.db import pool
from pgbus.errors import PgbusError
from pgbus.instrumentation import emit
from pgbus.serialization import dump_arguments

_registry: dict[str, type[Job]] = {}


class JobTransaction:
    """The running job's connection and transaction, both taken on first use: a job that never
    touches the database holds no connection and is acknowledged in bulk; one that does
    commits its writes (and the jobs it enqueues) together with its completion."""

    def __init__(self, stack: ExitStack) -> None:
        self._stack = stack
        self._conn: psycopg.Connection | None = None
        self._unavailable = False
        self.commit_hooks: list[Callable[[], None]] = []
        # time.monotonic() by which the transaction must be over (a workflow step's timeout, or
        # the stall threshold without one), so that a hung body holds no transaction open. With
        # `server_deadline` the server ends it then (statement and idle-in-transaction
        # timeouts: one more statement when it begins); else the worker's heartbeat does,
        # later by up to a beat (end_overdue).
        self.deadline: float | None = None
        self.server_deadline = False

    @property
    def begun(self) -> bool:
        return self._conn is not None

    @property
    def broken(self) -> bool:
        """pgbus's own connection failed (lost, or none to be had): an infrastructure failure,
        not the job's; what was written in the transaction is gone."""
        return self._unavailable or (self._conn is not None and self._conn.broken)

    def on_commit(self, hook: Callable[[], None]) -> None:
        """Runs after this transaction commits (the worker calls them); never on rollback."""
        self.commit_hooks.append(hook)

    def connection(self) -> psycopg.Connection:
        if self._conn is None:
            self._conn = self._begin()
        return self._conn

    def execute_once(self, query: str, params: tuple[Any, ...]) -> Any:
        """Runs one statement in this transaction and returns its first row. When nothing was
        written in it yet, the statement is the whole transaction: it runs on its own in
        autocommit (one round trip instead of BEGIN, statement, COMMIT) and has committed when
        this returns; the commit hooks still run after it, by the worker. (Tried again on a
        fresh connection when the first one was dead: had the first try committed after all,
        the statement must be one that is safe to run again.)"""
        if self._conn is not None:
            return self._conn.execute(query, params).fetchone()

        def run() -> Any:
            with pool().connection() as conn:
                return conn.execute(query, params).fetchone()

        return _retry_on_dead_connection(run)

    def _begin(self) -> psycopg.Connection:
        def take() -> tuple[ExitStack, psycopg.Connection]:
            taking = ExitStack()
            try:
                conn = taking.enter_context(pool().connection())
                taking.enter_context(conn.transaction())
            except BaseException:
                taking.close()
                raise
            return taking, conn

        try:
            taking, conn = _retry_on_dead_connection(take)
        except psycopg.OperationalError:  # (the pool's timeout is one too)
            self._unavailable = True
            raise
        self._stack.enter_context(taking)
        if self.deadline is not None and self.server_deadline:
            ms = str(max(1, int((self.deadline - time.monotonic()) * 1000)))
            conn.execute(
                "SELECT set_config('statement_timeout', %s, true),"
                " set_config('idle_in_transaction_session_timeout', %s, true)",
                (ms, ms),
            )
        elif self.deadline is not None:
            # (Its server process may go on to other work once this transaction ends: it is
            # ended only while in a transaction begun before halfway to the deadline, which a
            # later one, begun after this one ended, never is, whatever the clocks' skew up to
            # half the time allowed.)
            halfway = datetime.now(UTC) + timedelta(seconds=(self.deadline - time.monotonic()) / 2)
            with _watched_lock:
                _watched[id(self)] = WatchedTransaction(
                    self.deadline, conn.info.backend_pid, halfway
                )
            self._stack.callback(_unwatch, id(self))
        return conn


@dataclasses.dataclass(frozen=True)
class WatchedTransaction:
    deadline: float  # time.monotonic()
    pid: int  # the transaction's server process
    begun_before: datetime  # the server's clock: its transaction began before this


# Open transactions whose deadline the worker enforces, by id(JobTransaction).
_watched: dict[int, WatchedTransaction] = {}
_watched_lock = threading.Lock()


def _unwatch(key: int) -> None:
    with _watched_lock:
        _watched.pop(key, None)


def end_overdue(conn: psycopg.Connection) -> int:
    """Ends (on `conn`) the server processes of open job transactions past their deadline,
    each once, while still in the transaction watched; how many were past it."""
    now = time.monotonic()
    with _watched_lock:
        keys = [key for key, o in _watched.items() if o.deadline < now]
        overdue = [_watched.pop(key) for key in keys]
    if overdue:
        conn.execute(
            "SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity a"
            " JOIN unnest(%s::int[], %s::timestamptz[]) o(pid, begun_before) ON o.pid = a.pid"
            " WHERE a.xact_start < o.begun_before",
            ([o.pid for o in overdue], [o.begun_before for o in overdue]),
        )
    return len(overdue)


T = TypeVar("T")


def _retry_on_dead_connection(attempt: Callable[[], T]) -> T:
    """Pooled connections that died while idle (a server restart) fail their first use: the
    pool drops them all, and `attempt` is tried once more before the caller sees an error."""
    try:
        return attempt()
    except psycopg.OperationalError:
        pool().check()
        return attempt()


# The job running on this thread (its msg_id, read_ct, job_id...); None outside a job.
running_job: contextvars.ContextVar[Job | None] = contextvars.ContextVar(
    "pgbus_running_job", default=None
)


def current_job() -> Job | None:
    """The job running on this thread, or None: `pgbus.current_job().read_ct`."""
    return running_job.get()


# The transaction of the job running on this thread: enqueues from inside a job join it.
current_transaction: contextvars.ContextVar[JobTransaction | None] = contextvars.ContextVar(
    "pgbus_current_transaction", default=None
)


class UnknownJobClass(PgbusError):
    """A message names a job class this process has not imported."""

    def __init__(self, name: str) -> None:
        module = name.partition(":")[0]
        super().__init__(
            f"unknown job class {name!r}: import its module in the worker (pgbus start --import {module})"
        )


def releasing_lost_reads() -> list[type[Job]]:
    """The registered job classes whose `release_lost` has something to do."""
    return list({cls for cls in _registry.values() if cls.releases_lost_reads})


def job_class(name: str) -> type[Job]:
    try:
        return _registry[name]
    except KeyError:
        raise UnknownJobClass(name) from None


@contextmanager
def connection(conn: psycopg.Connection | None = None) -> Iterator[psycopg.Connection]:
    """The caller's connection, the running job's, or one from the pool."""
    running = current_transaction.get()
    given = conn or (running.connection() if running is not None else None)
    if given is not None:
        yield given
    else:
        with pool().connection() as pooled:
            yield pooled


@dataclasses.dataclass(frozen=True)
class Call:
    """One job's arguments, for perform_all_later and batches."""

    job: JobOptions
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class JobOptions:
    """A job class with enqueue options: what `Job.set(...)` returns."""

    job: type[Job]
    queue: str | None = None
    wait: timedelta | None = None
    wait_until: datetime | None = None
    priority: int | None = None

    def physical_queue(self) -> str:
        return queues.physical(
            self.queue or self.job.queue,
            self.priority if self.priority is not None else self.job.priority,
        )

    def run_at(self) -> datetime | None:
        if self.wait_until is not None:
            return self.wait_until
        if self.wait is not None:
            return datetime.now().astimezone() + self.wait
        return None

    def call(self, *args: Any, **kwargs: Any) -> Call:
        return Call(self, args, kwargs)

    def perform_later(
        self, *args: Any, conn: psycopg.Connection | None = None, **kwargs: Any
    ) -> int:
        """Enqueue one job; returns its message id."""
        return self.enqueue([self.call(*args, **kwargs)], conn=conn)[0]

    def perform_all_later(
        self, calls: Iterable[Call], conn: psycopg.Connection | None = None
    ) -> list[int]:
        return self.enqueue(list(calls), conn=conn)

    def enqueue(
        self,
        calls: list[Call],
        conn: psycopg.Connection | None = None,
        batch_id: UUID | None = None,
    ) -> list[int]:
        """Sends the calls (all of this job and these options) in one statement."""
        if not calls:
            return []
        arguments = [Jsonb(dump_arguments(c.args, c.kwargs)) for c in calls]
        queue = self.physical_queue()
        started = time.monotonic()
        with connection(conn) as c:
            ids = [
                row[0]
                for row in c.execute(
                    "SELECT * FROM pgbus.enqueue(queue => %(queue)s, job_class => %(job_class)s,"
                    " arguments => %(arguments)s::jsonb[], run_at => %(run_at)s,"
                    " batch_id => %(batch_id)s)",
                    {
                        "queue": queue,
                        "job_class": self.job.job_name,
                        "arguments": arguments,
                        "run_at": self.run_at(),
                        "batch_id": batch_id,
                    },
                )
            ]
        duration = time.monotonic() - started
        if len(ids) == 1:
            emit("pgbus.client.send_message", queue=queue, duration=duration)
        else:
            emit("pgbus.client.send_batch", queue=queue, size=len(ids), duration=duration)
        return ids


class Job:
    """Subclass and define `perform`. Class attributes set defaults for every enqueue."""

    queue: ClassVar[str | None] = None
    priority: ClassVar[int | None] = None
    max_retries: ClassVar[int | None] = None
    job_name: ClassVar[str]

    # Set by the worker for the running execution.
    acknowledged: bool = False  # the job recorded its own completion (workflow steps)
    read_context: dict[str, Any] | None = None  # what pgbus.read_jobs answered with the message
    msg_id: int
    read_ct: int
    job_id: str
    enqueued_at: datetime
    transaction: JobTransaction
    queue_name: str = ""  # the queue the message was read from
    worker_identity: str | None = None  # the worker running it (host:pid)
    # Takes the next delivery the worker holds for this thread to run after this one (a job
    # that records its own end may fold that delivery's start into it); None: none to take.
    reserve_next: Callable[[], Any] | None = None
    give_up: Callable[[], bool] | None = None  # True once the worker is closing: stop retrying

    # -- Hooks the worker calls, so that it stays queue-only: a workflow step
    # (pgbus.workflow.runner.StepJob) overrides them; a plain job keeps these defaults.

    # A message delivered more often than max_retries + 1 times without finishing is dead-
    # lettered unrun (each earlier run died with its worker).
    dead_letters_redeliveries: ClassVar[bool] = True

    @classmethod
    def on_read(cls, worker: Any, delivery: Any) -> bool:
        """Called when the worker reads a message of this class: True when it was dealt with
        here and there is nothing to run (the worker then forgets it)."""
        return False

    @classmethod
    def awaits_start(cls, delivery: Any) -> bool:
        """Whether the delivery must have its start recorded before it runs (it was read
        ahead): the worker folds that into a later transaction (`start_marks`)."""
        return False

    @classmethod
    def start_marks(cls, deliveries: list[Any]) -> tuple[str, dict[str, Any]]:
        """An SQL expression (and its named parameters) that records the start of
        `deliveries` and answers the `start_key`s of those it recorded, as an array."""
        raise NotImplementedError(f"{cls.__name__} has no start to record")

    @classmethod
    def start_key(cls, delivery: Any) -> Any:
        return delivery.msg_id

    @classmethod
    def on_start_marked(cls, delivery: Any, marked: bool) -> None:
        """After `start_marks` ran: `marked` False means the delivery must not run."""

    @classmethod
    def release_unstarted(
        cls, conn: psycopg.Connection, deliveries: list[Any], worker: str
    ) -> None:
        """A stopping worker hands back these deliveries it held and never ran (in the
        transaction that makes their messages visible again)."""

    # Whether `release_lost` has anything to do for this class (the worker calls it then).
    releases_lost_reads: ClassVar[bool] = False

    @classmethod
    def release_lost(cls, conn: psycopg.Connection, held: list[Any], worker: str) -> int:
        """A read of this worker lost its connection, possibly after it committed: hands back
        whatever that read began for `worker` (a workflow step's attempt) that is not among
        the deliveries it `held`. Returns how many went back."""
        return 0

    @property
    def conn(self) -> psycopg.Connection:
        """This execution's connection, in the transaction that also records its completion."""
        return self.transaction.connection()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A class may fix its own name (pgbus.workflow:StepJob); else module:qualname.
        cls.job_name = cls.__dict__.get("job_name") or f"{cls.__module__}:{cls.__qualname__}"
        _registry[cls.job_name] = cls

    def perform(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define perform()")

    def recover(self, exc: BaseException) -> bool:
        """Called by the worker after `exc` escaped perform (or the commit) and the job's
        transaction rolled back; True when the job dealt with it (a workflow step does), False
        to fail the job as usual."""
        return False

    @property
    def executions(self) -> int:
        """How many times this job ran before this attempt."""
        return self.read_ct - 1

    @classmethod
    def set(
        cls,
        *,
        queue: str | None = None,
        wait: timedelta | float | None = None,
        wait_until: datetime | None = None,
        priority: int | None = None,
    ) -> JobOptions:
        if wait is not None and not isinstance(wait, timedelta):
            wait = timedelta(seconds=wait)
        if wait_until is not None and wait_until.tzinfo is None:
            raise PgbusError("wait_until must be timezone-aware")
        if queue is not None:
            queues.normalize(queue)
        return JobOptions(cls, queue, wait, wait_until, priority)

    @classmethod
    def options(cls) -> JobOptions:
        return JobOptions(cls)

    @classmethod
    def call(cls, *args: Any, **kwargs: Any) -> Call:
        return cls.options().call(*args, **kwargs)

    @classmethod
    def perform_later(
        cls, *args: Any, conn: psycopg.Connection | None = None, **kwargs: Any
    ) -> int:
        return cls.options().perform_later(*args, conn=conn, **kwargs)

    @classmethod
    def perform_all_later(
        cls, calls: Iterable[Call | tuple[Any, ...]], conn: psycopg.Connection | None = None
    ) -> list[int]:
        """Calls, or plain tuples of positional arguments."""
        items = [c if isinstance(c, Call) else cls.call(*c) for c in calls]
        return cls.options().perform_all_later(items, conn=conn)


def job(
    fn: Callable[..., Any] | None = None,
    *,
    queue: str | None = None,
    priority: int | None = None,
    max_retries: int | None = None,
) -> Any:
    """Make a function a job: `@pgbus.job(queue="mail") def send(order_id): ...`."""

    def wrap(f: Callable[..., Any]) -> type[Job]:
        def perform(self: Job, *args: Any, **kwargs: Any) -> Any:
            return f(*args, **kwargs)

        attrs = {
            "perform": perform,
            "queue": queue,
            "priority": priority,
            "max_retries": max_retries,
            "__module__": f.__module__,
            "__qualname__": f.__qualname__,
            "__doc__": f.__doc__,
        }
        return type(f.__name__, (Job,), attrs)

    return wrap(fn) if fn is not None else wrap


def retry_policy(cls: type[Job] | None) -> dict[str, float]:
    """The retry settings for a job class (its own max_retries when it sets one)."""
    s = settings()
    own = getattr(cls, "max_retries", None)
    return {
        "max_retries": s.max_retries if own is None else own,
        "backoff_base": s.retry_backoff_base.total_seconds(),
        "backoff_max": s.retry_backoff_max.total_seconds(),
        "jitter": s.retry_backoff_jitter,
    }

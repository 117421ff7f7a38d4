"""Declaring workflows: steps in order, their options, exception policies, gravestones.

    class SignupWorkflow(pgbus.Workflow):
        exception_policies = [on_exception(TimeoutError, action="reattempt", wait=15, max_reattempts=5)]

        def cancel_if(self):
            return self.subject is None

        @step
        def welcome(self): ...

        @step(wait=timedelta(days=2), skip_if=lambda wf: wf.subject.onboarded)
        def reminder(self): ...

        complete = step("mark_complete", wait=timedelta(days=7))   # a step calling a method
        audit = step(lambda wf: wf.output(ok=True))                 # an anonymous body
        legacy = removed_step()                                     # a gravestone

        @step(wait_for="payment_confirmed", wait_timeout=timedelta(days=2), on_timeout="pause")
        def capture(self):                                          # a signal gate
            charge(self.received_signal.payload["amount"])

        @fan_out(on_batch_failure="pause")
        def notify_vendors(self, b):                                # one batch of jobs
            for vendor in self.arguments["vendors"]:
                b.add(NotifyVendor, vendor)

Steps run in the order they are declared (a subclass's after its base's).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from pgbus import queues
from pgbus.config import settings
from pgbus.jobs import Job, JobOptions
from pgbus.serialization import dump_arguments

VERBS = ("pause", "reattempt", "cancel", "skip")
TERMINAL_ACTIONS = ("pause", "cancel", "skip")  # what applies once max_reattempts is spent
TIMEOUT_ACTIONS = ("pause", "cancel", "skip", "run")
BATCH_FAILURE_ACTIONS = ("pause", "cancel", "skip")
ANY_SIGNAL = "*"  # what a gate with a matcher that names no signal waits for


def _seconds(value: timedelta | float | None, what: str) -> float | None:
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds < 0:
        raise ValueError(f"{what} must not be negative")
    return seconds


@dataclasses.dataclass(frozen=True)
class ExceptionPolicy:
    """What to do when a step raises one of `types` (and `matching` agrees)."""

    types: tuple[type[BaseException], ...]
    action: str = "pause"
    matching: Callable[[BaseException], bool] | str | None = None
    wait: float | None = None
    max_reattempts: int | None = None
    terminal_action: str = "pause"
    report: bool = True
    handler: Callable[[Any, BaseException], Any] | None = None

    def matches(self, exc: BaseException) -> bool:
        if not isinstance(exc, self.types):
            return False
        if self.matching is None:
            return True
        if isinstance(self.matching, str):
            return re.search(self.matching, str(exc)) is not None
        return bool(self.matching(exc))


def on_exception(
    *types: type[BaseException],
    action: str = "pause",
    matching: Callable[[BaseException], bool] | str | None = None,
    wait: timedelta | float | None = None,
    max_reattempts: int | None = None,
    terminal_action: str = "pause",
    report: bool = True,
    handler: Callable[[Any, BaseException], Any] | None = None,
) -> ExceptionPolicy:
    """A policy: `action` is pause, reattempt (after `wait`, at most `max_reattempts` times,
    then `terminal_action`: pause, cancel or skip), cancel or skip; or `handler(workflow, exc)`
    returns the verb (or (verb, wait)). A handler that raises or returns anything else pauses
    the run, with the problem recorded on the attempt (error["policy"]) and reported.
    `report=False` keeps the step's error from the error reporters."""
    if action not in VERBS:
        raise ValueError(
            f"an exception policy's action is one of {', '.join(VERBS)}, got {action!r}"
        )
    if terminal_action not in TERMINAL_ACTIONS:
        # (reattempt as the last word would reattempt for ever: it is what max_reattempts ends)
        raise ValueError(
            "an exception policy's terminal_action is one of "
            f"{', '.join(TERMINAL_ACTIONS)}, got {terminal_action!r}"
        )
    if max_reattempts is not None and max_reattempts < 0:
        raise ValueError("max_reattempts must not be negative")
    return ExceptionPolicy(
        types or (Exception,),
        action,
        matching,
        _seconds(wait, "wait"),
        max_reattempts,
        terminal_action,
        report,
        handler,
    )


@dataclasses.dataclass(frozen=True)
class Signal:
    """A signal a step took: `received_signal` inside the step."""

    signal_id: int
    name: str
    payload: Mapping[str, Any]
    idempotency_key: str | None
    created_at: str


class SignalMatcher:
    """Narrows what a gate takes: `SignalMatcher("shipped", lambda payload: payload["full"])`.
    Any object with `matches(signal)` works too; give it a `name` so that only signals of that
    name wake the step (without one, every signal does)."""

    def __init__(self, name: str, predicate: Callable[[Mapping[str, Any]], bool] | None = None):
        self.name = name
        self.predicate = predicate

    def matches(self, signal: Signal) -> bool:
        return signal.name == self.name and (
            self.predicate is None or bool(self.predicate(signal.payload))
        )

    def __repr__(self) -> str:
        return f"SignalMatcher({self.name!r})"


JOB_OPTIONS = ("queue", "priority", "wait")  # what Job.set(...) takes that a step can use


def check_job_options(options: Mapping[str, Any] | None, what: str) -> dict[str, Any]:
    """A step's job options (`job_options=`, or the class's `step_job_options`): the queue of
    its StepJob, the priority sub-queue, and a wait before the job runs (added to the step's
    own `wait`), as `Job.set(queue=, priority=, wait=)` takes them."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(JOB_OPTIONS))
    if unknown:
        raise ValueError(f"{what} takes {', '.join(JOB_OPTIONS)}; unknown: {', '.join(unknown)}")
    if options.get("queue") is not None:
        queues.physical(options["queue"], None)  # InvalidQueueName now, not at the first start
    priority = options.get("priority")
    if priority is not None and (
        not isinstance(priority, int) or isinstance(priority, bool) or priority < 0
    ):
        raise ValueError(f"{what} priority is a whole number from 0, got {priority!r}")
    _seconds(options.get("wait"), f"{what} wait")
    return options


def _hook(hook: Any, what: str) -> Callable[[Any], Any] | str | None:
    if hook is None or isinstance(hook, str) or callable(hook):
        return hook
    raise ValueError(f"{what} is a method's name or a function of the workflow, got {hook!r}")


def _gate(wait_for: Any) -> tuple[str, Any]:
    """The signal name SQL waits for, and the matcher Python checks."""
    if isinstance(wait_for, str):
        if not wait_for.strip() or len(wait_for) > 255:
            raise ValueError("wait_for names a signal of 1 to 255 characters")
        return wait_for, SignalMatcher(wait_for)
    if not callable(getattr(wait_for, "matches", None)):
        raise ValueError(
            f"wait_for takes a signal name, a SignalMatcher or an object with matches(signal), got {wait_for!r}"
        )
    name = getattr(wait_for, "name", None)
    return (name if isinstance(name, str) and name.strip() else ANY_SIGNAL), wait_for


class StepSpec:
    """A declared step: a body (a function of the workflow, or a method's name) and options.
    `before_step` / `after_step` run around this step's body only (inside the class's own
    hooks): a method's name, or a function of the workflow.
    `wait_for` makes it a signal gate: it parks until a signal it matches arrives;
    `wait_timeout` bounds that wait and `on_timeout` (pause, cancel, skip or run) says what
    happens then."""

    fan_out = False

    def __init__(
        self,
        body: Callable[[Any], Any] | str,
        *,
        name: str | None = None,
        wait: timedelta | float | None = None,
        skip_if: Callable[[Any], bool] | None = None,
        timeout: timedelta | float | None = None,
        job_options: dict[str, Any] | None = None,
        on_exception: Sequence[ExceptionPolicy] = (),
        wait_for: Any = None,
        wait_timeout: timedelta | float | None = None,
        on_timeout: str = "pause",
        before_step: Callable[[Any], Any] | str | None = None,
        after_step: Callable[[Any], Any] | str | None = None,
    ) -> None:
        self.body = body
        self.name = name or (
            None
            if isinstance(body, str) or getattr(body, "__name__", "<lambda>") == "<lambda>"
            else body.__name__
        )
        self.wait = _seconds(wait, "wait") or 0.0
        self.timeout = _seconds(timeout, "timeout")
        self.skip_if = skip_if
        self.job_options = check_job_options(job_options, "job_options")
        self.before_step = _hook(before_step, "before_step")
        self.after_step = _hook(after_step, "after_step")
        self.policies = tuple(on_exception)
        self.signal_name, self.matcher = _gate(wait_for) if wait_for is not None else (None, None)
        self.wait_timeout = _seconds(wait_timeout, "wait_timeout")
        if on_timeout not in TIMEOUT_ACTIONS:
            raise ValueError(
                f"on_timeout is one of {', '.join(TIMEOUT_ACTIONS)}, got {on_timeout!r}"
            )
        self.on_timeout = on_timeout
        if self.wait_timeout is not None and not self.waits:
            raise ValueError(
                "wait_timeout bounds a wait: give the step wait_for, or make it a fan_out"
            )

    @property
    def waits(self) -> bool:
        """Whether the step can park: a signal gate or a fan-out."""
        return self.signal_name is not None or self.fan_out

    def __set_name__(self, owner: type, attr: str) -> None:
        self.name = self.name or attr

    def bound_body(self, workflow: Any) -> Callable[..., Any]:
        return (
            getattr(workflow, self.body)
            if isinstance(self.body, str)
            else self.body.__get__(workflow)
        )

    def run(self, workflow: Any) -> Any:
        return self.bound_body(workflow)()

    def run_hook(self, which: str, workflow: Any) -> None:
        """This step's own before_step / after_step, if it has one (a method's name, or a
        function of the workflow)."""
        hook = getattr(self, which)
        if hook is None:
            return
        if isinstance(hook, str):
            getattr(workflow, hook)()
        else:
            hook(workflow)

    def definition(self, defaults: dict[str, Any]) -> dict[str, Any]:
        options = {**defaults, **self.job_options}
        entry = {
            "name": self.name,
            "wait": self.wait + (_seconds(options.get("wait"), "job_options wait") or 0.0),
            "timeout": self.timeout,
            "queue": queues.physical(
                options.get("queue") or settings().workflow_queue, options.get("priority")
            ),
        }
        if self.signal_name is not None:
            entry["wait_for"] = self.signal_name
        if self.wait_timeout is not None:
            entry |= {"wait_timeout": self.wait_timeout, "on_timeout": self.on_timeout}
        return entry


class FanOut:
    """What a fan-out body gets: `b.add(Job, *args, **kwargs)` (or `Job.set(...)`) records one
    member of the step's batch. The batch opens when the body returns; its callbacks are the
    workflow's own."""

    def __init__(self) -> None:
        self.jobs: list[dict[str, Any]] = []

    def add(self, target: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(target, type) and issubclass(target, Job):
            target = target.options()
        if not isinstance(target, JobOptions):
            raise TypeError(f"b.add takes a Job class or Job.set(...), got {target!r}")
        run_at = target.run_at()
        self.jobs.append(
            {
                "queue": target.physical_queue(),
                "job_class": target.job.job_name,
                "arguments": dump_arguments(args, kwargs),
                "run_at": run_at.isoformat() if run_at else None,
            }
        )


class FanOutSpec(StepSpec):
    """A fan-out step: its body gets a FanOut to add jobs to; they become one batch, and the
    step waits until every member finished. `on_batch_failure` (pause, cancel or skip) applies
    when one was dead-lettered."""

    fan_out = True

    def __init__(self, body: Any, *, on_batch_failure: str = "pause", **options: Any) -> None:
        if "wait_for" in options:
            raise ValueError("a fan_out step waits for its batch, not for a signal")
        if options.get("on_timeout") == "run":
            raise ValueError("a fan_out step's on_timeout is pause, cancel or skip")
        super().__init__(body, **options)
        if on_batch_failure not in BATCH_FAILURE_ACTIONS:
            raise ValueError(
                f"on_batch_failure is one of {', '.join(BATCH_FAILURE_ACTIONS)}, got {on_batch_failure!r}"
            )
        self.on_batch_failure = on_batch_failure

    def run(self, workflow: Any) -> FanOut:
        builder = FanOut()
        self.bound_body(workflow)(builder)
        return builder

    def definition(self, defaults: dict[str, Any]) -> dict[str, Any]:
        return super().definition(defaults) | {
            "fan_out": True,
            "on_batch_failure": self.on_batch_failure,
        }


class RemovedStep:
    """A gravestone: a step that is gone from the code, skipped by runs that still name it."""

    name: str | None = None

    def __set_name__(self, owner: type, attr: str) -> None:
        self.name = attr

    def definition(self, defaults: dict[str, Any]) -> dict[str, Any]:
        return {"name": self.name, "removed": True}


def step(body: Callable[[Any], Any] | str | None = None, /, **options: Any) -> Any:
    """Declares a step: `@step`, `@step(wait=...)`, `name = step("method", ...)` or
    `name = step(lambda wf: ..., ...)`."""
    if body is None:
        return lambda fn: StepSpec(fn, **options)
    return StepSpec(body, **options)


def fan_out(body: Callable[[Any, FanOut], Any] | str | None = None, /, **options: Any) -> Any:
    """Declares a fan-out step: `@fan_out`, `@fan_out(on_batch_failure="skip")` or
    `name = fan_out("method", ...)`; the body is `(self, b)` and adds jobs with `b.add`."""
    if body is None:
        return lambda fn: FanOutSpec(fn, **options)
    return FanOutSpec(body, **options)


def removed_step() -> RemovedStep:
    return RemovedStep()


def collect_steps(cls: type) -> list[StepSpec | RemovedStep]:
    """The class's steps in order: inherited ones first, each name once."""
    seen: dict[str, StepSpec | RemovedStep] = {}
    for klass in reversed(cls.__mro__):
        for attr, value in vars(klass).items():
            if isinstance(value, StepSpec | RemovedStep):
                seen.pop(value.name or attr, None)
                seen[value.name or attr] = value
    return list(seen.values())


def definition_payload(cls: type, steps: list[StepSpec | RemovedStep]) -> tuple[list[dict], str]:
    """The steps as SQL stores them, and the digest that identifies this definition."""
    defaults = dict(getattr(cls, "step_job_options", {}) or {})
    payload = [s.definition(defaults) for s in steps]
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]
    return payload, digest

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

Steps run in the order they are declared (a subclass's after its base's).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from pgbus import queues
from pgbus.config import settings

VERBS = ("pause", "reattempt", "cancel", "skip")


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
    then `terminal_action`), cancel or skip; or `handler(workflow, exc)` returns the verb (or
    (verb, wait)). `report=False` keeps the error from the error reporters."""
    for verb in (action, terminal_action):
        if verb not in VERBS:
            raise ValueError(
                f"an exception policy's action is one of {', '.join(VERBS)}, got {verb!r}"
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


class StepSpec:
    """A declared step: a body (a function of the workflow, or a method's name) and options."""

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
        self.job_options = dict(job_options or {})
        if set(self.job_options) - {"queue", "priority"}:
            raise ValueError("job_options takes 'queue' and 'priority'")
        self.policies = tuple(on_exception)

    def __set_name__(self, owner: type, attr: str) -> None:
        self.name = self.name or attr

    def run(self, workflow: Any) -> Any:
        fn = (
            getattr(workflow, self.body)
            if isinstance(self.body, str)
            else self.body.__get__(workflow)
        )
        return fn()

    def definition(self, defaults: dict[str, Any]) -> dict[str, Any]:
        options = {**defaults, **self.job_options}
        return {
            "name": self.name,
            "wait": self.wait,
            "timeout": self.timeout,
            "queue": queues.physical(
                options.get("queue") or settings().workflow_queue, options.get("priority")
            ),
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

"""The no-op workflow the benchmarks run: three steps that do nothing, on their own queue (so
that no other worker reading the database's default queues takes them)."""

from typing import ClassVar

import pgbus

QUEUE = "bench_workflows"


class NoopWorkflow(pgbus.Workflow):
    step_job_options: ClassVar[dict[str, str]] = {"queue": QUEUE}

    @pgbus.step
    def one(self) -> None:
        pass

    @pgbus.step
    def two(self) -> None:
        pass

    @pgbus.step
    def three(self) -> None:
        pass

"""The no-op job the benchmarks run."""

import pgbus


class Noop(pgbus.Job):
    def perform(self) -> None:
        pass

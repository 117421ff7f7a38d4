"""The no-op handler bench.events runs (its queue: pgbus_ev_noop_handler)."""

import pgbus


@pgbus.subscribe("bench.#")
class NoopHandler(pgbus.Handler):
    def handle(self, event: pgbus.Event) -> None:
        pass

"""Run from the installed wheel, outside the checkout: one workflow end to end through a real
`pgbus worker` process. Exits 0 when the run finished; prints one line saying what happened.

    python wheel_smoke.py    (copied outside the checkout; PGBUS_DATABASE_URL set, migrated)

The worker imports this same file as the module `wheel_smoke`, so the class has one name.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time

import pgbus

if not pathlib.Path(pgbus.__file__).resolve().is_relative_to(pathlib.Path(sys.prefix).resolve()):
    sys.exit(f"pgbus was imported from {pgbus.__file__}, not from this virtualenv's wheel")


class WheelSmoke(pgbus.Workflow):
    workflow_name = "wheel_smoke.WheelSmoke"

    @pgbus.step
    def first(self):
        self.output(n=self.arguments["n"] + 1)

    @pgbus.step
    def second(self):
        self.output(n=self.output_of("first")["n"] * 2)


def main() -> int:
    run = WheelSmoke.start(n=20)
    here = pathlib.Path(__file__).resolve().parent
    worker = subprocess.Popen(
        [
            pathlib.Path(sys.executable).with_name("pgbus"),
            *("worker", "--queues", "workflows", "--threads", "1", "--import", "wheel_smoke"),
        ],
        cwd=here,
        env={**os.environ, "PYTHONPATH": str(here)},
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while run.status() != "finished":
            if time.monotonic() > deadline or worker.poll() is not None:
                print(f"the run did not finish: {run.status()}; steps {run.steps()}")
                return 1
            time.sleep(0.05)
    finally:
        worker.terminate()
        worker.wait(30)
    output = run.steps()[-1]["output"]
    where = pathlib.Path(pgbus.__file__).parent
    print(f"workflow finished from the wheel (pgbus at {where}): {output}")
    return 0 if output == {"n": 42} else 1


if __name__ == "__main__":
    sys.exit(main())

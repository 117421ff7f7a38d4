"""The `pgbus` command. Errors come out as one line and a non-zero exit, never a traceback."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import psycopg

from pgbus import migrate
from pgbus.config import configure, settings
from pgbus.db import first_line
from pgbus.errors import PgbusError

Command = Callable[[argparse.Namespace], int]


def _say(line: str) -> None:
    print(line, flush=True)


def cmd_migrate(args: argparse.Namespace) -> int:
    report = migrate.migrate(settings().dsn(), log=_say)
    for line in report.lines()[1:]:
        _say(line)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    for line in migrate.status(settings().dsn()).lines():
        _say(line)
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from pgbus.doctor import diagnose

    diagnosis = diagnose(settings().dsn())
    for line in diagnosis.lines:
        _say(line)
    if diagnosis.problem:
        print(f"pgbus doctor: {diagnosis.problem}", file=sys.stderr)
        return 1
    _say("pgbus doctor: ready")
    return 0


def _boot(args: argparse.Namespace) -> None:
    """Logging, then the app's modules (its jobs and pgbus.configure()), then metrics."""
    import importlib
    import logging

    from pgbus.metrics import install_from_settings

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    for name in args.imports:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise PgbusError(f"cannot import {name!r}: {exc}") from exc
    install_from_settings()


def cmd_worker(args: argparse.Namespace) -> int:
    from pgbus.worker import Worker

    _boot(args)
    s = settings()
    queues = [q for q in args.queues.split(",") if q.strip()] or [s.default_queue, s.workflow_queue]
    return Worker(queues, threads=args.threads).run()


def cmd_dispatcher(args: argparse.Namespace) -> int:
    from pgbus.dispatcher import Dispatcher

    _boot(args)
    return Dispatcher().run()


def cmd_scheduler(args: argparse.Namespace) -> int:
    from pgbus.scheduler import Scheduler

    _boot(args)
    return Scheduler().run()


def cmd_start(args: argparse.Namespace) -> int:
    from pgbus.supervisor import Supervisor

    _boot(args)
    return Supervisor(
        args.imports, with_dispatcher=not args.no_dispatcher, with_scheduler=not args.no_scheduler
    ).run()


def cmd_demo(args: argparse.Namespace) -> int:
    from pgbus.demo import run

    return run(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pgbus", description=__doc__)
    parser.add_argument("--database-url", help="overrides PGBUS_DATABASE_URL")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    db = sub.add_parser("db", help="database schema").add_subparsers(
        dest="db_command", required=True, metavar="ACTION"
    )
    db.add_parser("migrate", help="install PGMQ and apply pending migrations").set_defaults(
        run=cmd_migrate
    )
    db.add_parser("status", help="applied and pending migrations, PGMQ version").set_defaults(
        run=cmd_status
    )
    sub.add_parser("doctor", help="check that the database is ready").set_defaults(run=cmd_doctor)
    app = argparse.ArgumentParser(add_help=False)
    app.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="a module defining jobs and calling pgbus.configure() (repeatable)",
    )
    start = sub.add_parser(
        "start", parents=[app], help="run the configured workers and a dispatcher"
    )
    start.add_argument("--no-dispatcher", action="store_true", help="no dispatcher")
    start.add_argument("--no-scheduler", action="store_true", help="no scheduler")
    start.set_defaults(run=cmd_start)
    worker = sub.add_parser("worker", parents=[app], help="run one worker process")
    worker.add_argument(
        "--queues",
        default="",
        help="comma-separated queues (default: default_queue and workflow_queue)",
    )
    worker.add_argument("--threads", type=int, default=5, help="jobs run at once (default 5)")
    worker.set_defaults(run=cmd_worker)
    sub.add_parser("dispatcher", parents=[app], help="run the maintenance process").set_defaults(
        run=cmd_dispatcher
    )
    sub.add_parser(
        "scheduler", parents=[app], help="run the scheduler (recurring and deploy tasks)"
    ).set_defaults(run=cmd_scheduler)
    demo = sub.add_parser("demo", help="run the sample workload against the database")
    demo.add_argument("--seconds", type=float, default=0, help="stop after this long (0: Ctrl-C)")
    demo.set_defaults(run=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.database_url:
            configure(database_url=args.database_url)
        return args.run(args)
    except PgbusError as exc:
        print(f"pgbus: {exc}", file=sys.stderr)
        return 1
    except psycopg.Error as exc:
        print(f"pgbus: database error: {first_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

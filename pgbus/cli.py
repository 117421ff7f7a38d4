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
    import importlib

    for name in args.imports:  # (modules that subscribe event handlers: bound below)
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise PgbusError(f"cannot import {name!r}: {exc}") from exc
    report = migrate.migrate(settings().dsn(), log=_say)
    for line in report.lines()[1:]:
        _say(line)
    if args.imports:
        from pgbus import events
        from pgbus.db import connect

        with connect(settings().dsn()) as c:
            new = events.bind_all(c)
        _say(f"Event subscriptions: {len(events.subscriptions())} bound, {new} new")
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
    try:  # the optional extra pgbus[otel]: a span per execution
        from pgbus import otel
    except ImportError:
        pass
    else:
        otel.install()


def cmd_worker(args: argparse.Namespace) -> int:
    from pgbus.worker import Worker

    _boot(args)
    s = settings()
    queues = [q for q in args.queues.split(",") if q.strip()] or [s.default_queue, s.workflow_queue]
    code = Worker(queues, threads=args.threads).run()
    if code == 2:
        # Jobs still ran after the drain timeout; their threads cannot be stopped, and the
        # interpreter would wait for them at exit. Their messages come back after the
        # visibility timeout.
        _exit_now(code)
    return code


def _exit_now(code: int) -> None:
    import logging
    import os

    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def cmd_consumer(args: argparse.Namespace) -> int:
    from pgbus.consumer import Consumer

    _boot(args)
    topics = [t.strip() for t in args.topics.split(",") if t.strip()] or ["#"]
    code = Consumer(topics, threads=args.threads).run()
    if code == 2:  # (handlers still running after the drain timeout: see cmd_worker)
        _exit_now(code)
    return code


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


LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def web_auth_from_environment():
    """The dashboard's auth for `pgbus web`: the web_auth setting, else PGBUS_WEB_PASSWORD
    (HTTP Basic, any user name) and/or PGBUS_WEB_TOKEN (Authorization: Bearer)."""
    import os

    from pgbus.web import any_of, basic_auth, bearer_auth

    if settings().web_auth is not None:
        return settings().web_auth
    checks = []
    if os.environ.get("PGBUS_WEB_PASSWORD"):
        checks.append(basic_auth(os.environ["PGBUS_WEB_PASSWORD"]))
    if os.environ.get("PGBUS_WEB_TOKEN"):
        checks.append(bearer_auth(os.environ["PGBUS_WEB_TOKEN"]))
    if not checks:
        return None
    return checks[0] if len(checks) == 1 else any_of(*checks)


def cmd_web(args: argparse.Namespace) -> int:
    import uvicorn

    from pgbus.web import create_app

    _boot(args)
    auth = web_auth_from_environment()
    if auth is None and args.host not in LOCAL_HOSTS and not args.insecure_no_auth:
        raise PgbusError(
            f"refusing to serve the dashboard on {args.host} without authentication: set "
            "PGBUS_WEB_PASSWORD or PGBUS_WEB_TOKEN, or pass --insecure-no-auth"
        )
    settings().dsn()  # a missing database URL is said now, not on the first page
    app = create_app(web_auth=auth)
    shown = f"[{args.host}]" if ":" in args.host else args.host
    _say(f"pgbus dashboard: http://{shown}:{args.port}/")
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    import logging

    from pgbus.mcp.transports import asgi_app, configured_token, payloads_allowed, serve_stdio

    _boot(args)
    settings().dsn()  # a missing database URL is said now, not on the first call
    if not args.http:
        # stdout is the protocol: everything else goes to stderr (logging does).
        serve_stdio()
        return 0
    import uvicorn

    token = configured_token()
    if token is None and args.host not in LOCAL_HOSTS and not args.insecure_no_auth:
        raise PgbusError(
            f"refusing to serve MCP on {args.host} without authentication: set "
            "PGBUS_MCP_TOKEN, or pass --insecure-no-auth"
        )
    app = asgi_app(token=token, allow_payloads=payloads_allowed(), allowed_hosts=args.allow_hosts)
    shown = f"[{args.host}]" if ":" in args.host else args.host
    logging.getLogger("pgbus.mcp").info("pgbus MCP: http://%s:%s/", shown, args.port)
    _say(f"pgbus MCP: http://{shown}:{args.port}/")
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


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
    db_migrate = db.add_parser("migrate", help="install PGMQ and apply pending migrations")
    db_migrate.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="a module subscribing event handlers: their queues and bindings are made too",
    )
    db_migrate.set_defaults(run=cmd_migrate)
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
    consumer = sub.add_parser("consumer", parents=[app], help="run one event consumer process")
    consumer.add_argument(
        "--topics",
        default="#",
        help="comma-separated subscription patterns it serves (default '#': all)",
    )
    consumer.add_argument("--threads", type=int, default=3, help="handlers run at once (default 3)")
    consumer.set_defaults(run=cmd_consumer)
    sub.add_parser("dispatcher", parents=[app], help="run the maintenance process").set_defaults(
        run=cmd_dispatcher
    )
    sub.add_parser(
        "scheduler", parents=[app], help="run the scheduler (recurring and deploy tasks)"
    ).set_defaults(run=cmd_scheduler)
    web = sub.add_parser("web", parents=[app], help="serve the dashboard")
    web.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    web.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    web.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="allow serving beyond localhost with no authentication",
    )
    web.set_defaults(run=cmd_web)
    mcp = sub.add_parser(
        "mcp", parents=[app], help="serve the MCP server (stdio, or HTTP with --http)"
    )
    mcp.add_argument("--http", action="store_true", help="streamable HTTP instead of stdio")
    mcp.add_argument("--host", default="127.0.0.1", help="HTTP address (default 127.0.0.1)")
    mcp.add_argument("--port", type=int, default=8765, help="HTTP port (default 8765)")
    mcp.add_argument(
        "--allow-host",
        dest="allow_hosts",
        action="append",
        default=[],
        metavar="HOST",
        help="a Host header accepted besides localhost, e.g. mcp.internal:* (repeatable)",
    )
    mcp.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="allow serving HTTP beyond localhost without PGBUS_MCP_TOKEN",
    )
    mcp.set_defaults(run=cmd_mcp)
    demo = sub.add_parser("demo", help="run the sample workload against the database")
    demo.add_argument("--seconds", type=float, default=0, help="stop after this long (0: Ctrl-C)")
    demo.add_argument(
        "--web-port", type=int, default=8080, help="serve the dashboard on this port (0: none)"
    )
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

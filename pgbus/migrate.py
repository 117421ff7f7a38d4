"""`pgbus db migrate` and `pgbus db status`.

Order of a migrate, all under one advisory lock so two processes migrating at once are safe:
the `pgbus` schema, PGMQ (extension where the server has it, else the SQL bundled in the pinned
`pgmq` package; never twice), the numbered yoyo migrations that apply `sql/schema/`, then every
`sql/functions/` and `sql/views/` file, re-applied whenever their text changed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from pgmq.install import get_embedded_install_sql, get_embedded_sql_version
from yoyo import get_backend, read_migrations, step

from pgbus.db import connect
from pgbus.errors import SchemaNotReady

# "pgbusmig" as a bigint: the advisory lock every migrate holds.
MIGRATE_LOCK = 0x70676275736D6967


def _resource_dir(name: str) -> Path:
    """A data folder: inside the installed package, or beside it in a checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / name, here.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"pgbus cannot find its {name}/ folder")


SQL_DIR = _resource_dir("sql")
MIGRATIONS_DIR = _resource_dir("migrations")


def schema_step(filename: str):
    """A yoyo step that applies one file of sql/schema/."""
    return step((SQL_DIR / "schema" / filename).read_text(encoding="utf-8"))


def _code_files() -> list[Path]:
    """Functions then views, each folder in file-name order."""
    return [
        *sorted((SQL_DIR / "functions").glob("*.sql")),
        *sorted((SQL_DIR / "views").glob("*.sql")),
    ]


def code_digest() -> str:
    h = hashlib.sha256()
    for f in _code_files():
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def yoyo_url(dsn: str) -> str:
    """yoyo wants postgresql+psycopg:// and keeps its own tables in the pgbus schema."""
    _scheme, rest = dsn.split("://", 1)
    sep = "&" if "?" in rest else "?"
    return f"postgresql+psycopg://{rest}{sep}schema=pgbus"


@dataclass
class MigrateReport:
    pgmq: str = ""
    applied: list[str] = field(default_factory=list)
    code_reapplied: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.applied or self.code_reapplied or self.pgmq.startswith("installed"))

    def lines(self) -> list[str]:
        out = [f"PGMQ: {self.pgmq}"]
        out += [f"Applied migration {m}" for m in self.applied]
        if self.code_reapplied:
            out.append("Re-applied SQL functions and views")
        if not self.changed:
            out.append("Nothing to do: the database is up to date")
        return out


def migrate(dsn: str, log: Callable[[str], None] = lambda _: None) -> MigrateReport:
    report = MigrateReport()
    with connect(dsn) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATE_LOCK,))
        try:
            conn.execute("CREATE SCHEMA IF NOT EXISTS pgbus")
            report.pgmq = _ensure_pgmq(conn)
            log(f"PGMQ: {report.pgmq}")
            dropped = _drop_views_before_migrations(conn, dsn)
            try:
                report.applied = _apply_migrations(dsn, log)
            except BaseException:
                if dropped:  # a migration failed: the views come back as they were
                    with suppress(Exception):
                        _apply_code(conn, force=True)
                raise
            if report.pgmq.startswith("installed SQL"):
                _set_meta(conn, "pgmq_sql_version", get_embedded_sql_version())
            report.code_reapplied = _apply_code(conn, force=dropped)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATE_LOCK,))
    return report


def _ensure_pgmq(conn: psycopg.Connection) -> str:
    present = conn.execute("SELECT to_regnamespace('pgmq') IS NOT NULL").fetchone()[0]
    if present:
        installed_as = conn.execute(
            "SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pgmq')"
            " THEN 'extension' ELSE 'SQL' END"
        ).fetchone()[0]
        return f"already installed ({installed_as})"
    available = conn.execute(
        "SELECT default_version FROM pg_available_extensions WHERE name = 'pgmq'"
    ).fetchone()
    with conn.transaction():
        if available:
            conn.execute("CREATE EXTENSION pgmq")
            return f"installed extension {available[0]}"
        conn.execute(get_embedded_install_sql())
    return f"installed SQL {get_embedded_sql_version()}"


def _apply_migrations(dsn: str, log: Callable[[str], None]) -> list[str]:
    backend = get_backend(yoyo_url(dsn))
    try:
        migrations = read_migrations(str(MIGRATIONS_DIR))
        with backend.lock():
            pending = backend.to_apply(migrations)
            for m in pending:
                log(f"Applying migration {m.id}")
            backend.apply_migrations(pending)
        return [m.id for m in pending]
    finally:
        backend.connection.close()


def _drop_views_before_migrations(conn: psycopg.Connection, dsn: str) -> bool:
    """With migrations pending, pgbus's views go first (sql/views/ re-creates them right
    after), so that none holds back a migration that changes a column it reads."""
    backend = get_backend(yoyo_url(dsn))
    try:
        pending = backend.to_apply(read_migrations(str(MIGRATIONS_DIR)))
    finally:
        backend.connection.close()
    if not pending:
        return False
    with conn.transaction():
        views = conn.execute(
            "SELECT format('%I.%I', schemaname, viewname) FROM pg_views WHERE schemaname = 'pgbus'"
        ).fetchall()
        for (view,) in views:
            conn.execute(f"DROP VIEW IF EXISTS {view} CASCADE")
    return bool(views)


def _apply_code(conn: psycopg.Connection, force: bool = False) -> bool:
    digest = code_digest()
    if not force and _get_meta(conn, "sql_digest") == digest:
        return False
    with conn.transaction():
        for f in _code_files():
            conn.execute(f.read_text(encoding="utf-8"))
        _set_meta(conn, "sql_digest", digest)
    return True


def _get_meta(conn: psycopg.Connection, key: str) -> str | None:
    if conn.execute("SELECT to_regclass('pgbus.meta')").fetchone()[0] is None:
        return None
    row = conn.execute("SELECT value FROM pgbus.meta WHERE key = %s", (key,)).fetchone()
    return row[0] if row else None


def _set_meta(conn: psycopg.Connection, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO pgbus.meta (key, value) VALUES (%s, %s)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = now()",
        (key, value),
    )


# The scheduler's tables (migration 0010_scheduler): `pgbus db status` names the missing ones.
SCHEDULER_TABLES = (
    "pgbus.recurring_tasks",
    "pgbus.recurring_executions",
    "pgbus.deploy_tasks",
    "pgbus.deploy_task_runs",
)


@dataclass
class Status:
    applied: list[tuple[str, str]]
    pending: list[str]
    pgmq_installed_as: str
    pgmq_version: str | None
    code_current: bool
    missing_tables: list[str] = field(default_factory=list)

    @property
    def up_to_date(self) -> bool:
        return (
            not self.pending
            and self.code_current
            and self.pgmq_installed_as != "missing"
            and not self.missing_tables
        )

    def lines(self) -> list[str]:
        version = self.pgmq_version or "version unknown"
        out = [
            f"PGMQ: {self.pgmq_installed_as}"
            + ("" if self.pgmq_installed_as == "missing" else f" ({version})")
        ]
        out += [f"applied  {mid}  {at}" for mid, at in self.applied]
        out += [f"pending  {mid}" for mid in self.pending]
        out.append(
            "SQL functions and views: " + ("current" if self.code_current else "out of date")
        )
        if self.missing_tables:
            out.append(
                "Recurring and deploy task tables missing ("
                + ", ".join(self.missing_tables)
                + "): the scheduler cannot run"
            )
        out.append(
            "Up to date" if self.up_to_date else "Run `pgbus db migrate` to bring it up to date"
        )
        return out


def status(dsn: str) -> Status:
    with connect(dsn) as conn:
        has_yoyo = conn.execute("SELECT to_regclass('pgbus._yoyo_migration')").fetchone()[0]
        applied: list[tuple[str, str]] = []
        if has_yoyo:
            applied = [
                (mid, at.strftime("%Y-%m-%d %H:%M:%S UTC"))
                for mid, at in conn.execute(
                    "SELECT migration_id, applied_at_utc FROM pgbus._yoyo_migration"
                    " ORDER BY migration_id"
                )
            ]
        done = {mid for mid, _ in applied}
        pending = [m.id for m in read_migrations(str(MIGRATIONS_DIR)) if m.id not in done]
        if conn.execute("SELECT to_regproc('pgbus.pgmq_info')").fetchone()[0]:
            installed_as, version = conn.execute("SELECT * FROM pgbus.pgmq_info()").fetchone()
        else:
            installed_as = (
                "missing"
                if conn.execute("SELECT to_regnamespace('pgmq') IS NULL").fetchone()[0]
                else "sql"
            )
            version = None
        code_current = _get_meta(conn, "sql_digest") == code_digest()
        missing_tables = [
            t
            for t in SCHEDULER_TABLES
            if conn.execute("SELECT to_regclass(%s)", (t,)).fetchone()[0] is None
        ]
    return Status(applied, pending, installed_as, version, code_current, missing_tables)


def require_migration(conn: psycopg.Connection, migration_id: str) -> None:
    """Raise SchemaNotReady unless `migration_id` is applied to this database."""
    applied = conn.execute("SELECT to_regclass('pgbus._yoyo_migration')").fetchone()[0] and (
        conn.execute(
            "SELECT 1 FROM pgbus._yoyo_migration WHERE migration_id = %s", (migration_id,)
        ).fetchone()
    )
    if not applied:
        raise SchemaNotReady(migration_id)

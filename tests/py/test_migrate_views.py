"""`pgbus db migrate` with migrations pending drops pgbus's views first and re-creates them
after, so that a migration may change a column a view reads; a migration that fails leaves the
views as they were. The pending migrations here are real yoyo files beside copies of pgbus's
own, applied to a real database."""

from __future__ import annotations

import shutil
from pathlib import Path

import psycopg
import pytest

from pgbus import migrate

# A column the read layer's views select (pgbus.workflow_runs_overview and others).
WIDEN = "ALTER TABLE pgbus.workflow_steps ALTER COLUMN step_name TYPE varchar(300)"


def views(url: str) -> dict[str, str]:
    """pgbus's views and the type of each one's step_name column, if it has one."""
    with psycopg.connect(url) as c:
        rows = c.execute(
            "SELECT v.viewname, (SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a"
            "  WHERE a.attrelid = format('pgbus.%I', v.viewname)::regclass"
            "  AND a.attname IN ('step_name', 'current_step') LIMIT 1)"
            " FROM pg_views v WHERE v.schemaname = 'pgbus'"
        ).fetchall()
    return {name: kind for name, kind in rows}


@pytest.fixture
def pending(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A migrations folder holding pgbus's own and the one written by the returned function
    (pending until the next migrate)."""
    folder = tmp_path / "migrations"
    shutil.copytree(migrate.MIGRATIONS_DIR, folder, ignore=shutil.ignore_patterns("__pycache__"))
    existing = sorted(p.stem for p in folder.glob("0*.py"))

    def add(name: str, statement: str) -> None:
        (folder / f"{name}.py").write_text(
            "from yoyo import step\n\n"
            f"steps = [step({statement!r})]\n"
            f"__depends__ = {set(existing)!r}\n"
        )

    monkeypatch.setattr(migrate, "MIGRATIONS_DIR", folder)
    return add


def test_a_migration_that_changes_a_column_a_view_reads_applies(empty_db_url, pending):
    migrate.migrate(empty_db_url)
    before = views(empty_db_url)
    assert "workflow_runs_overview" in before
    with psycopg.connect(empty_db_url) as c:  # (the views do hold such a change back)
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="used by a view"):
            c.execute(WIDEN)
        c.rollback()
    pending("9001_widen_step_name", WIDEN)
    report = migrate.migrate(empty_db_url)
    assert report.applied == ["9001_widen_step_name"] and report.code_reapplied
    after = views(empty_db_url)
    assert set(after) == set(before)  # every view is back ...
    assert before["workflow_attempts"] == "text"
    assert after["workflow_attempts"] == "character varying(300)"  # ... reading the new column
    assert migrate.status(empty_db_url).up_to_date


def test_a_migration_that_fails_leaves_the_views_in_place(empty_db_url, pending):
    migrate.migrate(empty_db_url)
    before = views(empty_db_url)
    pending("9002_fails", "SELECT 1 / 0")
    with pytest.raises(psycopg.errors.DivisionByZero):
        migrate.migrate(empty_db_url)
    assert views(empty_db_url) == before
    with psycopg.connect(empty_db_url) as c:  # (and they work)
        c.execute("SELECT count(*) FROM pgbus.workflow_runs_overview").fetchone()
    assert migrate.status(empty_db_url).pending == ["9002_fails"]

import concurrent.futures

import psycopg
import pytest
from pgmq.install import get_embedded_install_sql

from pgbus import migrate
from pgbus.errors import SchemaNotReady
from tests.py.support import QUEUE_FUNCTIONS, queue_statements_written, run_pgbus

ALL = sorted(m.id for m in migrate.read_migrations(str(migrate.MIGRATIONS_DIR)))


def _catalog_snapshot(url):
    """Every pgbus/pgmq function and relation with its row version: any DDL changes it."""
    with psycopg.connect(url) as c:
        return c.execute(
            "SELECT p.oid::regprocedure::text, p.xmin::text FROM pg_proc p"
            " WHERE p.pronamespace IN ('pgbus'::regnamespace, 'pgmq'::regnamespace)"
            " UNION ALL SELECT c.oid::regclass::text, c.xmin::text FROM pg_class c"
            " WHERE c.relnamespace IN ('pgbus'::regnamespace, 'pgmq'::regnamespace)"
            " ORDER BY 1"
        ).fetchall()


def test_migrate_twice_changes_nothing(empty_db_url):
    first = migrate.migrate(empty_db_url)
    assert first.changed
    assert first.pgmq.startswith("installed")
    assert sorted(first.applied) == ALL  # (applied in dependency order)
    assert first.code_reapplied
    before = _catalog_snapshot(empty_db_url)

    second = migrate.migrate(empty_db_url)
    assert not second.changed
    assert second.applied == []
    assert "Nothing to do: the database is up to date" in second.lines()
    assert _catalog_snapshot(empty_db_url) == before


def test_pgmq_install_is_detected_and_not_repeated(empty_db_url):
    migrate.migrate(empty_db_url)
    with psycopg.connect(empty_db_url, autocommit=True) as c:
        c.execute("SELECT pgmq.create('kept')")
        c.execute("SELECT pgmq.send('kept', '{\"n\": 1}')")
    report = migrate.migrate(empty_db_url)
    assert report.pgmq == "already installed (SQL)"
    with psycopg.connect(empty_db_url) as c:
        assert c.execute("SELECT count(*) FROM pgmq.q_kept").fetchone()[0] == 1
        assert c.execute("SELECT * FROM pgbus.pgmq_info()").fetchone() == ("sql", "1.13.0")


def test_migrate_over_an_existing_sql_install_of_pgmq(empty_db_url):
    with psycopg.connect(empty_db_url, autocommit=True) as c:
        c.execute(get_embedded_install_sql())
        c.execute("SELECT pgmq.create('theirs')")
        c.execute("SELECT pgmq.send('theirs', '{}')")
    report = migrate.migrate(empty_db_url)
    assert report.pgmq == "already installed (SQL)"
    assert sorted(report.applied) == ALL
    with psycopg.connect(empty_db_url) as c:
        assert c.execute("SELECT count(*) FROM pgmq.q_theirs").fetchone()[0] == 1
        # Installed by someone else: pgbus does not claim to know its version.
        assert c.execute("SELECT * FROM pgbus.pgmq_info()").fetchone() == ("sql", None)
    assert "PGMQ: sql (version unknown)" in migrate.status(empty_db_url).lines()


def test_two_processes_migrating_at_once(empty_db_url):
    env = {"PGBUS_DATABASE_URL": empty_db_url}
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda _: run_pgbus("db", "migrate", env=env), range(2)))
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    outputs = sorted(r.stdout for r in runs)
    assert sum("Applied migration 0001_foundation" in o for o in outputs) == 1
    assert sum("Nothing to do" in o for o in outputs) == 1
    with psycopg.connect(empty_db_url) as c:
        assert c.execute("SELECT count(*) FROM pgbus._yoyo_migration").fetchone()[0] == len(ALL)
        assert (
            c.execute("SELECT count(*) FROM pgbus.meta WHERE key = 'sql_digest'").fetchone()[0] == 1
        )


def test_changed_functions_are_reapplied(db_url):
    with psycopg.connect(db_url, autocommit=True) as c:
        c.execute("UPDATE pgbus.meta SET value = 'stale' WHERE key = 'sql_digest'")
        c.execute("DROP FUNCTION pgbus.pgmq_info")
    assert not migrate.status(db_url).code_current
    report = migrate.migrate(db_url)
    assert report.code_reapplied and report.applied == []
    with psycopg.connect(db_url) as c:
        assert c.execute("SELECT installed_as FROM pgbus.pgmq_info()").fetchone()[0] == "sql"


def test_reapplying_the_functions_writes_the_queue_statements_for_every_queue(db_url):
    """An upgrade: queues made before this version, or by pgmq.create alone, get their own
    statements in the queue functions when `migrate` re-applies the SQL."""
    with psycopg.connect(db_url, autocommit=True) as c:
        c.execute("SELECT pgmq.create('made_by_pgmq')")
        c.execute("UPDATE pgbus.meta SET value = 'stale' WHERE key = 'sql_digest'")
    migrate.migrate(db_url)
    with psycopg.connect(db_url) as c:
        assert queue_statements_written(c, "made_by_pgmq") == QUEUE_FUNCTIONS


def test_status_of_an_unmigrated_database(empty_db_url):
    st = migrate.status(empty_db_url)
    assert st.pending == ALL
    assert st.applied == []
    assert st.pgmq_installed_as == "missing"
    assert not st.up_to_date


def test_status_of_a_migrated_database(db_url):
    st = migrate.status(db_url)
    assert [mid for mid, _ in st.applied] == ALL
    assert st.pending == [] and st.up_to_date
    assert st.lines()[0] == "PGMQ: sql (1.13.0)"


def test_require_migration(db_url, empty_db_url):
    with psycopg.connect(db_url) as c:
        migrate.require_migration(c, "0001_foundation")
        with pytest.raises(SchemaNotReady, match="run `pgbus db migrate`"):
            migrate.require_migration(c, "9999_future")
    with psycopg.connect(empty_db_url) as c, pytest.raises(SchemaNotReady):
        migrate.require_migration(c, "0001_foundation")


def test_cli_migrate_and_status(empty_db_url):
    env = {"PGBUS_DATABASE_URL": empty_db_url}
    first = run_pgbus("db", "migrate", env=env)
    assert first.returncode == 0
    assert "PGMQ: installed SQL 1.13.0" in first.stdout
    second = run_pgbus("db", "migrate", env=env)
    assert "Nothing to do: the database is up to date" in second.stdout
    status = run_pgbus("db", "status", env=env)
    assert "applied  0001_foundation" in status.stdout and "Up to date" in status.stdout

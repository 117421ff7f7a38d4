"""Every test gets its own freshly migrated database, cloned from a template migrated once."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest

import pgbus
from pgbus import migrate
from tests.py.support import database_url

ADMIN_URL = os.environ.get("PGBUS_TEST_ADMIN_URL") or os.environ.get("PGBUS_DATABASE_URL")
if not ADMIN_URL:
    pytest.exit("the tests need a PostgreSQL server: run scripts/test", returncode=2)


def _admin(sql: str) -> None:
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(sql)


def create_database(name: str, template: str | None = None) -> str:
    clause = f' TEMPLATE "{template}"' if template else ""
    _admin(f'CREATE DATABASE "{name}"{clause}')
    return database_url(ADMIN_URL, name)


def drop_database(name: str) -> None:
    _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def template_name() -> Iterator[str]:
    name = f"pgbus_tmpl_{os.getpid()}"
    drop_database(name)
    migrate.migrate(create_database(name))
    yield name
    drop_database(name)


@pytest.fixture
def empty_db_url() -> Iterator[str]:
    """A database with nothing in it: not migrated, no PGMQ."""
    name = f"pgbus_e_{uuid.uuid4().hex[:10]}"
    yield create_database(name)
    drop_database(name)


@pytest.fixture
def db_url(template_name: str) -> Iterator[str]:
    """A migrated database of this test's own; pgbus is configured to use it."""
    name = f"pgbus_t_{uuid.uuid4().hex[:10]}"
    url = create_database(name, template=template_name)
    pgbus.configure(database_url=url)
    yield url
    from pgbus.db import close_pool

    close_pool()
    pgbus.config.reset()
    drop_database(name)


@pytest.fixture
def conn(db_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(db_url, autocommit=True) as c:
        yield c


@pytest.fixture
def effects(conn: psycopg.Connection) -> psycopg.Connection:
    """A table the sample jobs write to; returns the test's connection."""
    conn.execute(
        "CREATE TABLE effects (id bigserial PRIMARY KEY, kind text NOT NULL, key text NOT NULL,"
        " at timestamptz NOT NULL DEFAULT clock_timestamp())"
    )
    return conn


@pytest.fixture
def users(effects: psycopg.Connection) -> psycopg.Connection:
    """The sample workflows' subjects: a `users` table with users 1-3 (and `effects`)."""
    effects.execute(
        "CREATE TABLE users (id int PRIMARY KEY, onboarded bool NOT NULL DEFAULT false,"
        " closed bool NOT NULL DEFAULT false)"
    )
    effects.execute("INSERT INTO users (id) VALUES (1), (2), (3)")
    return effects


@pytest.fixture
def procs() -> Iterator[list]:
    """Real processes a test starts; stopped (then killed) at its end."""
    started: list = []
    yield started
    for p in started:
        p.stop()


@pytest.fixture
def throwaway_cluster() -> Iterator:
    """A PostgreSQL cluster of this test's own on a free port (tests/py/throwaway_cluster.py):
    restart it, kill it, stop it; removed at the end."""
    from tests.py.throwaway_cluster import ThrowawayCluster

    with ThrowawayCluster() as cluster:
        yield cluster

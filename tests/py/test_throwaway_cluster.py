"""The throwaway cluster helper itself: a real server the test may stop, crash and restart."""

from __future__ import annotations

import psycopg
import pytest

from tests.py.throwaway_cluster import ThrowawayCluster


def test_a_cluster_is_made_migrated_restarted_and_removed() -> None:
    with ThrowawayCluster() as cluster:
        url = cluster.create_database("app")
        with psycopg.connect(url, autocommit=True) as c:
            assert c.execute("SELECT to_regnamespace('pgbus') IS NOT NULL").fetchone()[0]
            c.execute("CREATE TABLE t (x int)")
            c.execute("INSERT INTO t VALUES (1)")
        cluster.restart(mode="immediate")  # crash recovery keeps the committed row
        with psycopg.connect(url) as c:
            assert c.execute("SELECT count(*) FROM t").fetchone()[0] == 1
        cluster.stop()
        assert not cluster.running()
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(url, connect_timeout=2)
        cluster.start()
        cluster.wait_ready()
        root = cluster.root
    assert not root.exists()


def test_the_fixture_gives_a_running_cluster(throwaway_cluster: ThrowawayCluster) -> None:
    url = throwaway_cluster.create_database("x", migrate=False)
    with psycopg.connect(url) as c:
        assert c.execute("SELECT current_setting('fsync')").fetchone()[0] == "off"

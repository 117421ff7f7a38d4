import subprocess

from tests.py.support import ROOT, run_pgbus


def test_doctor_on_an_unreachable_database():
    r = run_pgbus("doctor", env={"PGBUS_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/nowhere"})
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("pgbus: cannot reach the database at 127.0.0.1:1/nowhere:")
    assert "nobody" not in lines[0]


def test_doctor_on_an_unmigrated_database(empty_db_url):
    r = run_pgbus("doctor", env={"PGBUS_DATABASE_URL": empty_db_url})
    assert r.returncode == 1
    assert r.stderr.strip() == "pgbus doctor: PGMQ is not installed: run `pgbus db migrate`"
    assert "pending  0001_foundation" in r.stdout


def test_doctor_on_pending_migrations(db_url):
    import psycopg

    with psycopg.connect(db_url, autocommit=True) as c:
        c.execute("DELETE FROM pgbus._yoyo_migration")
    r = run_pgbus("doctor", env={"PGBUS_DATABASE_URL": db_url})
    assert r.returncode == 1
    from tests.py.test_migrate import ALL

    assert (
        r.stderr.strip() == f"pgbus doctor: {len(ALL)} pending migration(s): run `pgbus db migrate`"
    )


def test_doctor_on_a_ready_database(db_url):
    r = run_pgbus("doctor", env={"PGBUS_DATABASE_URL": db_url})
    assert r.returncode == 0, r.stderr
    assert "PostgreSQL: " in r.stdout
    assert "PGMQ: sql (1.13.0)" in r.stdout
    assert "Health: OK" in r.stdout
    assert r.stdout.strip().endswith("pgbus doctor: ready")


def test_doctor_shares_the_dashboards_health_verdict(db_url):
    import psycopg

    with psycopg.connect(db_url, autocommit=True) as c:
        c.execute("SELECT pgbus.enqueue('pgbus_default', 'Mail', ARRAY['{}'::jsonb])")
        r = run_pgbus("doctor", env={"PGBUS_DATABASE_URL": db_url})
        assert r.returncode == 0, r.stderr
        assert "Health: DEGRADED" in r.stdout
        assert "  - work in queues no worker drains: pgbus_default" in r.stdout
        # A live worker that never claims a message visible for minutes: STALLED, exit 1.
        c.execute(
            "INSERT INTO pgbus.processes (kind, hostname, pid, metadata)"
            " VALUES ('worker', 'h', 1, '{\"queues\": [\"pgbus_default\"]}')"
        )
        c.execute("UPDATE pgmq.q_pgbus_default SET vt = now() - interval '5 minutes'")
        r = run_pgbus("doctor", env={"PGBUS_DATABASE_URL": db_url})
        assert r.returncode == 1
        assert "Health: STALLED" in r.stdout
        assert r.stderr.startswith("pgbus doctor: work is stalled: visible messages nobody claims")


def test_missing_database_url_is_one_line(monkeypatch):
    monkeypatch.delenv("PGBUS_DATABASE_URL", raising=False)
    monkeypatch.delenv("PGBUS_TEST_ADMIN_URL", raising=False)
    r = run_pgbus("doctor")
    assert r.returncode == 1
    assert r.stderr.strip() == (
        "pgbus: pgbus setting 'database_url' is not set: set PGBUS_DATABASE_URL"
        " or pgbus.configure(database_url=...)"
    )


def test_dev_server_script_without_postgresql():
    r = subprocess.run(
        ["bash", str(ROOT / "scripts/pg"), "start"],
        env={"PATH": "/usr/bin:/bin", "PGBUS_PG_SEARCH": "/nonexistent"},
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1
    assert "no PostgreSQL server found" in r.stderr
    assert "PGBUS_DATABASE_URL" in r.stderr


def test_demo_runs_jobs_through_real_processes(db_url):
    import socket
    import threading

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    seen = []
    demo_over = threading.Event()

    def watch():  # the dashboard answers while the demo runs
        while not demo_over.is_set():
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/queues", timeout=1)
                if r.status_code == 200 and "pgbus_default" in r.text:
                    seen.append(True)
                    return
            except httpx.HTTPError:
                pass
            demo_over.wait(0.2)

    watcher = threading.Thread(target=watch)
    watcher.start()
    r = run_pgbus(
        "demo",
        "--seconds",
        "15",  # room for a loaded machine: the workflows must reach their signal gate
        "--web-port",
        str(port),
        env={"PGBUS_DATABASE_URL": db_url},
        timeout=90,
    )
    demo_over.set()
    watcher.join(30)
    assert r.returncode == 0, r.stderr
    assert "started the supervisor" in r.stdout
    assert f"dashboard: http://127.0.0.1:{port}/" in r.stdout
    assert seen, "the dashboard did not answer during the demo"
    import re

    last = [line for line in r.stdout.splitlines() if line.startswith("[")][-1]
    assert int(re.search(r"done (\d+)", last).group(1)) > 0, r.stdout
    assert re.search(r"workflows: .*finished \d+", last), r.stdout
    assert "worker x2" in r.stdout and "dispatcher x1" in r.stdout
    assert "resumed" in r.stdout and "signalled payment_confirmed" in r.stdout, r.stdout
    assert r.stdout.strip().endswith("demo stopped")

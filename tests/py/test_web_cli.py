"""`pgbus web` as a real process: serves the dashboard, asks for auth from the environment, and
refuses to listen beyond localhost without it."""

from __future__ import annotations

import base64
import socket

import httpx

from tests.py.support import pgbus_process, run_pgbus, wait_until


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_refuses_to_listen_beyond_localhost_without_auth(db_url):
    r = run_pgbus("web", "--host", "0.0.0.0", "--port", "1", env={"PGBUS_DATABASE_URL": db_url})
    assert r.returncode == 1
    assert r.stderr.strip() == (
        "pgbus: refusing to serve the dashboard on 0.0.0.0 without authentication: set "
        "PGBUS_WEB_PASSWORD or PGBUS_WEB_TOKEN, or pass --insecure-no-auth"
    )


def test_serves_with_a_password_from_the_environment(db_url, procs):
    port = free_port()
    p = pgbus_process(
        "web",
        "--host",
        "0.0.0.0",
        "--port",
        str(port),
        env={"PGBUS_DATABASE_URL": db_url, "PGBUS_WEB_PASSWORD": "pw", "PGBUS_WEB_TOKEN": "tok"},
    )
    procs.append(p)
    p.wait_for_output(f"pgbus dashboard: http://0.0.0.0:{port}/")
    base = f"http://127.0.0.1:{port}"
    wait_until(lambda: _get(base + "/livez") == 200, what="the server")
    assert _get(base + "/") == 401
    basic = "Basic " + base64.b64encode(b"erin:pw").decode()
    r = httpx.get(base + "/", headers={"authorization": basic})
    assert r.status_code == 200 and "Signed in as erin" in r.text
    r = httpx.get(base + "/api/metrics", headers={"authorization": "Bearer tok"})
    assert r.status_code == 200 and "pgbus_health_status" in r.text
    assert httpx.get(base + "/readyz").json()["status"] in ("OK", "DEGRADED")


def test_insecure_no_auth_is_allowed_when_asked(db_url, procs):
    port = free_port()
    p = pgbus_process(
        "web",
        "--host",
        "0.0.0.0",
        "--port",
        str(port),
        "--insecure-no-auth",
        env={"PGBUS_DATABASE_URL": db_url},
    )
    procs.append(p)
    p.wait_for_output("pgbus dashboard:")
    wait_until(lambda: _get(f"http://127.0.0.1:{port}/queues") == 200, what="the server")


def _get(url: str) -> int:
    try:
        return httpx.get(url, timeout=2).status_code
    except httpx.HTTPError:
        return 0

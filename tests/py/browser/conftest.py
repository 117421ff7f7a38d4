"""Browser tests: Debian's chromium driven by playwright, against the dashboard served by a
real uvicorn on a free port, on a database of its own seeded with sample data."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.py.browser.seed import seed
from tests.py.conftest import create_database, drop_database

CHROMIUM = os.environ.get("PGBUS_CHROMIUM", "/usr/bin/chromium")
HERE = Path(__file__).parent
AXE = HERE / "vendor" / "axe.min.js"
ROOT = HERE.parents[2]
# The refresh interval the tests serve the app with: short, so pauses show within a second.
REFRESH_MS = 400

if not Path(CHROMIUM).exists():
    pytest.exit(f"the browser tests need {CHROMIUM}: run scripts/test (it installs chromium)", 2)

playwright_api = pytest.importorskip("playwright.sync_api")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    url: str
    db_url: str
    proc: subprocess.Popen
    log: Path


def start_server(db_url: str, tmp: Path, refresh_ms: int = REFRESH_MS) -> Server:
    port = free_port()
    log = tmp / f"uvicorn-{port}.log"
    env = dict(
        os.environ,
        PGBUS_DATABASE_URL=db_url,
        PGBUS_TEST_REFRESH_MS=str(refresh_ms),
        PGBUS_WEB_SECRET_KEY="browser-tests",
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "--factory",
            "tests.py.browser.serve:app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            with urllib.request.urlopen(url + "/livez", timeout=1) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"uvicorn did not start:\n{log.read_text()}")
        time.sleep(0.1)
    return Server(url, db_url, proc, log)


def stop_server(server: Server) -> None:
    server.proc.terminate()
    try:
        server.proc.wait(10)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait()


# Package scope: Playwright's sync API keeps an event loop running in the main thread while it
# is open, so it must be closed before the tests after this package start event loops of their own.
@pytest.fixture(scope="package")
def dashboard(template_name: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One seeded database and one uvicorn for the browser tests of a session."""
    name = f"pgbus_b_{uuid.uuid4().hex[:10]}"
    db_url = create_database(name, template=template_name)
    seed(db_url)
    server = start_server(db_url, tmp_path_factory.mktemp("web"))
    yield server
    stop_server(server)
    drop_database(name)


@pytest.fixture(scope="package")
def browser() -> Iterator[object]:
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--no-first-run",
                "--disable-component-update",
                "--disable-sync",
                "--disable-quic",
            ],
        )
        yield b
        b.close()


@dataclass
class Watched:
    """A page with everything it asked for and every console error recorded."""

    page: object
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@pytest.fixture
def context(browser) -> Iterator[object]:
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    yield ctx
    ctx.close()


def watch(page) -> Watched:
    w = Watched(page)
    page.on("request", lambda r: w.requests.append(r.url))
    page.on("console", lambda m: m.type == "error" and w.errors.append(m.text))
    page.on("pageerror", lambda e: w.errors.append(str(e)))
    return w


@pytest.fixture
def page(context) -> Watched:
    return watch(context.new_page())


def same_origin(url: str, base: str) -> bool:
    u, b = urlsplit(url), urlsplit(base)
    if u.scheme in ("data", "blob", "about"):
        return True
    return (u.scheme, u.netloc) == (b.scheme, b.netloc)

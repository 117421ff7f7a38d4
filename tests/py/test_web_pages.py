"""The dashboard's pages, fragments, layout contract, mounting and security headers."""

from __future__ import annotations

import re

import pytest
from pgbus.web import create_app
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from tests.py.web_support import client, dead_letter, enqueue, fail

PAGES = {
    "/": ["cards", "health", "queues", "processes", "failures"],
    "/queues": ["queues"],
    "/queues/pgbus_default": ["summary", "messages"],
    "/jobs": ["failed", "enqueued"],
    "/dead-letters": ["messages"],
    "/batches": ["batches"],
    "/processes": ["processes"],
    "/insights": ["insights"],
    "/insights?period=30d": ["insights"],
}


@pytest.fixture
def busy(conn):
    """A queue with waiting, failed and dead-lettered jobs, and a batch."""
    ids = enqueue(conn, "pgbus_default", n=5, kwargs={"password": "hunter2", "user": "ann"})
    fail(conn, "pgbus_default", ids[0])
    dead_letter(conn, "pgbus_default", ids[1])
    conn.execute("SELECT pgbus.batch_open('nightly report', '{\"report\": \"n1\"}')")
    return ids


def test_every_page_and_fragment_renders(db_url, busy):
    c = client(db_url)
    for page, regions in PAGES.items():
        r = c.get(page)
        assert r.status_code == 200, (page, r.text[:300])
        for region in regions:
            assert f'<section id="{region}" data-refresh="' in r.text, (page, region)
            sep = "&" if "?" in page else "?"
            f = c.get(f"{page}{sep}fragment={region}")
            assert f.status_code == 200, (page, region)
            assert "<html" not in f.text and "<section" not in f.text
        assert c.get(f"{page}{'&' if '?' in page else '?'}fragment=nope").status_code == 404


def test_the_fragment_is_the_regions_inner_html(db_url, busy):
    c = client(db_url)
    page = c.get("/queues").text
    inner = re.search(r'<section id="queues"[^>]*>\n(.*?)</section>', page, re.S).group(1)
    assert c.get("/queues?fragment=queues").text.strip() == inner.strip()


def test_pages_show_the_real_figures(db_url, busy):
    c = client(db_url)
    home = c.get("/").text
    assert "pgbus_default" in home and "pgbus_default_dlq" in home
    jobs = c.get("/jobs").text
    assert "Attempt 1 of 4 failed: ConnectionError" in jobs
    assert "next attempt in" in jobs
    assert "No worker drains this queue" in jobs
    dlq = c.get("/dead-letters").text
    assert "ValueError" in dlq and "poison" in dlq
    assert "nightly report" in c.get("/batches").text


def test_payloads_are_shown_with_secrets_filtered(db_url, busy):
    c = client(db_url)
    r = c.get(f"/jobs/pgbus_default/{busy[2]}")
    assert r.status_code == 200
    assert "hunter2" not in r.text
    assert "[FILTERED]" in r.text and "ann" in r.text
    failed = c.get(f"/jobs/pgbus_default/{busy[0]}").text
    assert "gateway timed out" in failed and "a.py:1" in failed
    custom = client(db_url, filter_parameters=["user"])
    text = custom.get(f"/jobs/pgbus_default/{busy[2]}").text
    assert "ann" not in text and "hunter2" in text


def test_layout_contract(db_url):
    c = client(db_url, refresh_interval_ms=7000)
    html = c.get("/").text
    assert '<body data-refresh-interval="7000">' in html
    assert 'href="/static/pgbus.css"' in html
    assert '<script defer src="/static/vendor/htmx.min.js"></script>' in html
    assert '<script defer src="/static/pgbus.js"></script>' in html
    assert "apexcharts" not in html
    assert "apexcharts.min.js" in c.get("/insights").text
    assert '<button id="theme-toggle" type="button"' in html
    assert '<div id="pgbus-toasts" aria-live="polite">' in html


def test_no_page_references_another_origin_or_inline_script(db_url, busy):
    c = client(db_url)
    for page in PAGES:
        html = c.get(page).text
        for url in re.findall(r'(?:src|href|action|formaction)="([^"]*)"', html):
            assert url.startswith(("/", "#")) and not url.startswith("//"), (page, url)
        assert not re.search(r"<script(?![^>]*\bsrc=)", html), page
        assert not re.search(r"\son[a-z]+=", html), page


def test_security_headers_and_csp(db_url):
    c = client(db_url)
    for path in ("/", "/livez", "/queues/nope"):
        r = c.get(path)
        csp = r.headers["content-security-policy"]
        script_src = re.search(r"script-src ([^;]*)", csp).group(1)
        assert script_src.strip() == "'self'"
        assert "frame-ancestors 'self'" in csp
        assert r.headers["x-frame-options"] == "SAMEORIGIN"
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["referrer-policy"] == "strict-origin-when-cross-origin"


def test_mounted_under_a_prefix_every_url_keeps_it(db_url, busy):
    outer = Starlette(routes=[Mount("/ops/pgbus", app=create_app(database_url=db_url))])
    c = TestClient(outer, follow_redirects=False)
    html = c.get("/ops/pgbus/").text
    urls = re.findall(r'(?:src|href|action|data-refresh)="([^"]*)"', html)
    assert urls and all(u.startswith(("/ops/pgbus/", "#")) for u in urls), urls
    assert c.get("/ops/pgbus/queues?fragment=queues").status_code == 200


def test_fastapi_mount(db_url):
    import fastapi

    app = fastapi.FastAPI()
    app.mount("/pgbus", create_app(database_url=db_url))
    c = TestClient(app)
    r = c.get("/pgbus/queues")
    assert r.status_code == 200 and 'href="/pgbus/jobs"' in r.text


def test_bad_input_is_a_plain_400_or_404(db_url, busy):
    c = client(db_url)
    cases = {
        "/queues/NOPE": 404,
        "/queues/no_such_queue": 404,
        "/jobs/pgbus_default/abc": 404,
        "/jobs/pgbus_default/99999999999999999999": 404,
        "/jobs/pgbus_default/%C2%B2": 404,  # "²" is a digit to str.isdigit, not to int()
        "/queues/pgbus_default?before=%C2%B2": 400,
        "/jobs/pgbus_default/424242": 404,
        "/jobs?before=garbage": 400,
        "/jobs?queue=Bad!": 404,
        "/queues/pgbus_default?before=-1": 400,
        "/dead-letters/pgbus_default/1": 404,
        "/batches/not-a-uuid": 404,
        "/batches/00000000-0000-0000-0000-000000000000": 404,
        "/insights?period=2y": 400,
    }
    for path, status in cases.items():
        r = c.get(path)
        assert r.status_code == status, (path, r.status_code, r.text[:200])
        assert r.headers["content-type"].startswith("text/plain")
        assert "Traceback" not in r.text and "psycopg" not in r.text


def test_queue_messages_page_by_keyset(db_url, conn):
    ids = enqueue(conn, "pgbus_default", n=60)
    c = client(db_url)
    first = c.get("/queues/pgbus_default").text
    shown = [int(x) for x in re.findall(r'/jobs/pgbus_default/(\d+)"', first)]
    assert shown == sorted(ids, reverse=True)[:25]
    nxt = re.search(r'href="([^"]*before=\d+)" rel="next"', first).group(1)
    second = c.get(nxt.replace("&amp;", "&")).text
    shown2 = [int(x) for x in re.findall(r'/jobs/pgbus_default/(\d+)"', second)]
    assert shown2 == sorted(ids, reverse=True)[25:50]


def test_a_big_queue_is_shown_with_capped_counts_and_metrics_say_so(db_url, conn):
    conn.execute("SELECT pgbus.enqueue('pgbus_big', 'Mail', array_fill('{}'::jsonb, ARRAY[1100]))")
    enqueue(conn, "pgbus_small", n=3)
    c = client(db_url)
    page = c.get("/queues").text
    row = re.search(r"pgbus_big</a></th>(.*?)</tr>", page, re.S).group(1)
    assert "≈ 1," in row and "1,000+" in row
    assert "Queues above 1,000 messages are not counted in full" in page
    assert re.search(r"their figures \(ages too\) were counted (just now|\d+ s ago)", page)
    metrics = c.get("/api/metrics").text
    depth = float(re.search(r'pgbus_queue_depth\{queue="pgbus_big"\} (\S+)', metrics).group(1))
    assert depth >= 1001  # PostgreSQL's estimate, never below the count that stopped
    assert 'pgbus_queue_counts_estimated{queue="pgbus_big"} 1.0' in metrics
    assert 'pgbus_queue_depth{queue="pgbus_small"} 3.0' in metrics
    assert 'pgbus_queue_counts_estimated{queue="pgbus_small"} 0.0' in metrics


def test_small_queues_alone_have_no_estimate_note(db_url, conn):
    enqueue(conn, "pgbus_small", n=3)
    page = client(db_url).get("/queues").text
    assert "pgbus_small" in page and "not counted in full" not in page


def test_a_fragment_reads_only_its_region(db_url, conn, monkeypatch):
    from pgbus.data import DataSource

    calls = []
    for name in (
        "overview",
        "summary",
        "queues",
        "processes",
        "failed_jobs",
        "table_health",
        "health",
    ):
        original = getattr(DataSource, name)

        def spy(self, *a, _name=name, _original=original, **k):
            calls.append(_name)
            return _original(self, *a, **k)

        monkeypatch.setattr(DataSource, name, spy)
    c = client(db_url)
    assert c.get("/?fragment=processes").status_code == 200
    assert calls == ["processes"]
    calls.clear()
    assert c.get("/").status_code == 200
    assert sorted(calls) == ["failed_jobs", "overview", "processes", "table_health"]


@pytest.mark.parametrize("root_path", ["", "/ops/pgbus"])
def test_page_links_are_the_routers_own(root_path):
    """The pages' url() works a route's path out once per request and fills the values in:
    the path Starlette's url_for gives for the value, percent-encoded unless it is plain path
    text, mounted or not; decoded, as the server does before routing, it is the value's own."""
    from pgbus.web.app import Dashboard
    from pgbus.web.security import Signer
    from starlette.requests import Request

    from pgbus.data import DataSource

    app = create_app(database_url="postgresql://nobody@127.0.0.1:1/none")
    dash = Dashboard(DataSource("postgresql://nobody@127.0.0.1:1/none"), Signer(None), 5000, (), 25)
    scope = {
        "type": "http",
        "method": "GET",
        "path": root_path + "/workflows",
        "root_path": root_path,
        "query_string": b"",
        "headers": [(b"host", b"testserver")],
        "scheme": "http",
        "server": ("testserver", 80),
        "router": app.router,
        "app": app,
    }
    request = Request(scope)
    url = dash.context(request)["url"]
    cases = [
        ("workflows", {}),
        ("workflow", {"workflow_id": "0b8e6c3e-8f5e-4a55-9c1b-1f6f6c0f7a11"}),
        ("workflow_action", {"workflow_id": "0b8e6c3e", "action": "resume"}),
        ("workflow_definition", {"workflow_class": "app:Orders::Checkout"}),
        ("workflow_definition", {"workflow_class": "with space"}),
        ("workflow_definition", {"workflow_class": "q?x#y"}),
        ("workflow_definition", {"workflow_class": "~pgbus-param-workflow_class~"}),
        ("job", {"queue": "mail", "msg_id": 7}),
    ]
    from urllib.parse import quote, unquote

    from pgbus.web.app import PLAIN_PATH_PARAM

    def encoded(v: object) -> str:
        return str(v) if PLAIN_PATH_PARAM.fullmatch(str(v)) else quote(str(v), safe="")

    for _ in range(2):  # the second round from the request's cache
        for name, params in cases:
            raw = {k: str(v) for k, v in params.items()}
            got = url(name, **params)
            assert got == request.url_for(name, **{k: encoded(v) for k, v in raw.items()}).path
            # Decoded, as the server does before routing: the path of the value itself.
            assert unquote(got) == root_path + app.router.url_path_for(name, **raw), (name, params)
    assert url("workflows", query={"step": "a b", "before": None}) == (
        request.url_for("workflows").path + "?step=a+b"
    )

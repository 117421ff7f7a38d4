"""Random query strings and forms to every Workflows route: never a 500, and a refused request
(4xx, or an action answered "Not done") changes nothing."""

from __future__ import annotations

from urllib.parse import quote, urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pgbus.web import create_app
from starlette.routing import Route

from tests.py.web_support import client, csrf, flash_text
from tests.py.workflow_page_support import paused_on_error

ROUTES = [
    r
    for r in create_app(database_url="postgresql://x/y").routes
    if isinstance(r, Route) and r.name.startswith("workflow")
]
text = st.text(max_size=40)
VERBS = ("resume", "resume_at", "run_now", "skip", "signal", "pause", "cancel", "rerun")
FILTERS = [
    "status",
    "workflow_class",
    "step",
    "error_class",
    "subject_type",
    "subject_id",
    "workflow_id",
    "created_from",
    "created_to",
    "ended_from",
    "ended_to",
    "before",
    "fragment",
]
VALUES = [
    "all",
    "paused",
    "ongoing",
    "Fuzz",
    "capture",
    "TimeoutError",
    "Order",
    "1",
    "2026-12-01T10:00",
    "2026-12-01",
    "runs",
    "groups",
    "",
    "2026-12-01T10:00:00+00:00~00000000-0000-0000-0000-000000000000",
]


def snapshot(conn):
    return conn.execute(
        "SELECT (SELECT string_agg(workflow_id || status || updated_at, ',' ORDER BY workflow_id)"
        "        FROM pgbus.workflows),"
        " (SELECT count(*) FROM pgbus.workflow_events),"
        " (SELECT count(*) FROM pgbus.workflow_signals)"
    ).fetchone()


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: r.name)
def test_random_requests(db_url, conn, route):
    ids = paused_on_error(conn, "Fuzz", 3)
    c = client(db_url)
    token = csrf(c, f"/workflows/{ids[0]}")
    post = "POST" in (route.methods or ())
    verbs = ("resume", "cancel") if route.name == "workflows_attention_action" else VERBS

    @settings(
        max_examples=50,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        run=st.one_of(st.sampled_from(ids), st.uuids().map(str), text),
        verb=st.one_of(st.sampled_from(verbs), text),
        query=st.lists(
            st.tuples(st.sampled_from(FILTERS), st.one_of(st.sampled_from(VALUES), text)),
            max_size=4,
        ),
        form=st.lists(
            st.tuples(
                st.sampled_from(
                    [
                        "reason",
                        "step",
                        "name",
                        "payload",
                        "idempotency_key",
                        "workflow_class",
                        "step_name",
                        "stuck_reason",
                        "error_class",
                        "return_to",
                    ]
                ),
                st.one_of(
                    st.sampled_from(
                        [
                            "Fuzz",
                            "capture",
                            "paused_error",
                            "TimeoutError",
                            "{}",
                            "[1]",
                            "x" * 1001,
                            "/workflows",
                            "//x",
                        ]
                    ),
                    text,
                ),
            ),
            max_size=6,
        ),
        with_token=st.booleans(),
    )
    def go(run, verb, query, form, with_token):
        path = route.path.replace("{workflow_id}", quote(run, safe="")).replace(
            "{action}", quote(verb, safe="")
        )
        before = snapshot(conn)
        if post:
            body = list(form) + ([("csrf_token", token)] if with_token else [])
            r = c.post(
                path,
                content=urlencode(body),
                params=query,
                headers={"content-type": "application/x-www-form-urlencoded"},
            )
        else:
            r = c.get(path, params=query)
        assert r.status_code < 500, (path, query, form, r.status_code, r.text[:300])
        if r.status_code >= 400:
            assert r.headers["content-type"].startswith("text/plain") and "Traceback" not in r.text
            assert snapshot(conn) == before, (path, query, form, r.status_code)
        if r.status_code == 303:
            assert r.headers["location"].startswith("/")
            said = flash_text(c, "/workflows")
            if said and said[0][0] == "refused":
                assert snapshot(conn) == before, (path, form, said)

    go()


@pytest.mark.parametrize("field", ["reason", "payload", "name"])
def test_nul_character_in_a_form_is_refused(db_url, conn, field):
    """PostgreSQL text cannot hold NUL: a form carrying one is a 400 that changes nothing
    (hypothesis once found a reason of "\\x00" answered with a 500)."""
    ids = paused_on_error(conn, "Fuzz", 1)
    c = client(db_url)
    token = csrf(c, f"/workflows/{ids[0]}")
    before = snapshot(conn)
    r = c.post(
        f"/workflows/{ids[0]}/resume",
        content=urlencode([(field, "a\x00b"), ("csrf_token", token)]),
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 400, (r.status_code, r.text[:200])
    assert r.headers["content-type"].startswith("text/plain")
    assert snapshot(conn) == before

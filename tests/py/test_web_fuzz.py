"""Random forms and query strings to every route: never a 500, and a refusal changes nothing."""

from __future__ import annotations

from urllib.parse import quote, urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pgbus.web import create_app
from starlette.routing import Route

from tests.py.web_support import client, csrf, dead_letter, enqueue, fail

Q = "pgbus_default"
# The Workflows pages have their own (tests/py/test_web_workflow_fuzz.py).
ROUTES = [
    r
    for r in create_app(database_url="postgresql://x/y").routes
    if isinstance(r, Route) and not r.name.startswith("workflow")
]
text = st.text(max_size=60)


def mostly(*valid: str, other: st.SearchStrategy[str] = text) -> st.SearchStrategy[str]:
    """Seven draws in eight from the valid values (so actions really run), else `other`."""
    good = st.sampled_from(valid)
    return st.one_of(good, good, good, good, good, good, good, other)


ACTIONS = {
    "queue_action": ("pause", "resume", "purge", "delete"),
    "jobs_bulk": ("retry-selected", "discard-selected", "discard-enqueued"),
    "dead_letters_bulk": ("retry-selected", "discard-selected", "retry-all", "discard-all"),
    "recurring_action": ("run", "enable", "disable"),
    "deploy_action": ("run", "enable", "disable"),
    "events_bulk": ("discard-selected",),
    "event_action": ("discard", "replay", "mark-handled", "retry", "edit", "reroute"),
}
TASKS = {"recurring": "nightly", "deploy": "backfill"}  # a task of each kind (see declare_tasks)


def declare_tasks(conn) -> None:
    conn.execute(
        "SELECT pgbus.recurring_sync(%s::jsonb)",
        (
            '[{"key": "nightly", "class_name": "app:Job", "schedule": "0 3 * * *",'
            f' "queue_name": "{Q}"}}]',
        ),
    )
    conn.execute(
        "SELECT pgbus.deploy_tasks_declare(%s::jsonb)",
        (f'[{{"key": "backfill", "class_name": "app:Job", "version": "1", "queue_name": "{Q}"}}]',),
    )


def param(route: Route, name: str, batch: str) -> st.SearchStrategy[str]:
    if name == "action":
        return mostly(*ACTIONS.get(route.name, ("retry", "discard")))
    if name in ("name", "queue"):
        dead = route.name.startswith("dead_letter")
        return mostly(
            f"{Q}_dlq" if dead else Q,
            "nope",
            other=st.one_of(st.just("A"), st.just("x" * 50), text),
        )
    if name == "msg_id":
        return mostly(
            "1",
            "2",
            "3",
            "4",
            "0",
            other=st.one_of(
                st.sampled_from(
                    ["99999999999999999999", "1e3", "-1", "²", "١٢", "\uff11"]
                ),  # superscript, Arabic-Indic, full-width
                st.integers(min_value=-(2**70), max_value=2**70).map(str),
                text,
            ),
        )
    if name == "key":
        own = TASKS["recurring" if route.name.startswith("recurring") else "deploy"]
        return mostly(own, "nobody", other=text)
    assert name == "batch_id"
    return st.one_of(st.just(batch), st.just(batch), st.uuids().map(str), text)


query_items = st.lists(
    st.tuples(
        st.sampled_from(["fragment", "before", "failed_before", "queue", "period", "x"]),
        st.one_of(st.sampled_from(["queues", "1", Q, "7d", ""]), text),
    ),
    max_size=4,
)
form_items = st.lists(
    st.tuples(
        st.sampled_from(["item", "reason", "queue", "return_to", "payload", "target", "x"]),
        st.one_of(
            st.sampled_from(
                [f"{Q}:1", f"{Q}:3", f"{Q}_dlq:1", f"{Q}:x", f"{Q}:²", ":", "/jobs", "//x"]
            ),
            text,
        ),
    ),
    max_size=6,
)


def snapshot(conn):
    return conn.execute(
        "SELECT (SELECT count(*) FROM pgbus.queue_pauses),"
        " (SELECT count(*) FROM pgmq.meta),"
        " (SELECT coalesce(sum(depth), 0) FROM pgbus.queue_stats()),"
        " (SELECT count(*) FROM pgbus.job_failures),"
        " (SELECT count(*) FROM pgbus.operator_actions)"
    ).fetchone()


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: r.name)
def test_random_requests(db_url, conn, route):
    ids = enqueue(conn, Q, n=4)
    fail(conn, Q, ids[0])
    dead_letter(conn, Q, ids[1])
    batch = str(conn.execute("SELECT pgbus.batch_open('fuzz')").fetchone()[0])
    declare_tasks(conn)
    c = client(db_url)
    token = csrf(c)
    post = "POST" in (route.methods or ())
    seen: set[int] = set()

    @settings(
        max_examples=60,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(data=st.data(), query=query_items, form=form_items, with_token=st.booleans())
    def run(data, query, form, with_token):
        path = route.path
        for name in route.param_convertors:
            path = path.replace(
                "{" + name + "}", quote(data.draw(param(route, name, batch)), safe="")
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
        seen.add(r.status_code)
        assert r.status_code < 500, (path, query, form, r.status_code, r.text[:300])
        if r.status_code >= 400:
            assert r.headers["content-type"].startswith(("text/plain", "application/json"))
            assert "Traceback" not in r.text
            assert snapshot(conn) == before, (path, query, form, r.status_code)
        if r.status_code == 303:  # an action ran: its answer is a toast, ok or refused
            assert r.headers["location"].startswith("/")

    run()
    assert seen

    # The same route with valid input works (so the random run was not refused wholesale).
    valid = {
        "name": Q,
        "queue": f"{Q}_dlq" if route.name.startswith("dead_letter") else Q,
        "msg_id": str(ids[2] if not route.name.startswith("dead_letter") else dl_id(conn)),
        "action": ACTIONS.get(route.name, ("retry", "discard"))[0],
        "batch_id": batch,
        "key": TASKS["recurring" if route.name.startswith("recurring") else "deploy"],
    }
    path = route.path
    for name in route.param_convertors:
        path = path.replace("{" + name + "}", valid[name])
    if post:
        assert c.post(path, data={}).status_code == 403
        r = c.post(path, data={"csrf_token": token, "item": f"{Q}:{ids[3]}"})
        assert r.status_code == 303, (path, r.text)
    else:
        assert c.get(path).status_code == 200, path


def dl_id(conn) -> int:
    return conn.execute(f"SELECT min(msg_id) FROM pgmq.q_{Q}_dlq").fetchone()[0] or 1

"""The dashboard's Workflows pages against the real engine: the list with every filter and
sentence kind, a run's page, the attention page, every action and its refusals, settings."""

from __future__ import annotations

import html
import json
import logging
import re
import uuid

import psycopg
import pytest

import pgbus
from tests.py.support import wait_until
from tests.py.web_support import client, flash_text, post
from tests.py.workflow_page_support import (
    ERROR,
    end_step,
    paused_on_error,
    register,
    start,
    status,
    take_steps,
)


def text(r) -> str:
    """The page's visible words (tags dropped, entities decoded, spaces collapsed)."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", r.text)).split())


def rows(r) -> list[str]:
    body = re.search(r"<tbody>(.*?)</tbody>", r.text, re.S).group(1)
    return re.findall(r'href="/workflows/([0-9a-f-]{36})"', body)


def act(c, run: str, verb: str, data: dict | None = None):
    return post(c, f"/workflows/{run}/{verb}", data, page=f"/workflows/{run}")


# -- the list ---------------------------------------------------------------------------------


@pytest.fixture
def runs(conn):
    """5 OrderFlow runs paused on TimeoutError at capture, one cancelled, one scheduled ahead,
    one overdue, one waiting for a signal, one finished."""
    paused = paused_on_error(conn, "OrderFlow", 5)
    gone = start(conn, "OrderFlow", ("Order", "gone"))
    conn.execute("SELECT pgbus.workflow_command(%s, 'cancel', 'ops')", (gone,))
    register(conn, "Welcome", [{"name": "welcome", "wait": 3600}])
    later = start(conn, "Welcome", ("User", "1"))
    late = start(conn, "Welcome", ("User", "2"))
    conn.execute(
        "UPDATE pgbus.workflow_steps SET scheduled_at = now() - interval '2 hours',"
        " created_at = now() - interval '3 hours' WHERE workflow_id = %s",
        (late,),
    )
    register(
        conn,
        "Gated",
        [{"name": "confirm", "wait_for": "payment_confirmed", "wait_timeout": 172800}],
    )
    gated = start(conn, "Gated", ("Payment", "9"))
    for s in take_steps(conn, "Gated"):
        end_step(conn, s["step_id"], "park")
    register(conn, "Vendors", [{"name": "notify_vendors"}, {"name": "ship"}])
    fanned = start(conn, "Vendors")
    jobs = [
        {
            "queue": "vendors_m",
            "job_class": "app:Notify",
            "arguments": {"args": [i]},
            "run_at": None,
        }
        for i in range(12)
    ]
    for s in take_steps(conn, "Vendors"):
        end_step(conn, s["step_id"], "park", fan_out=jobs)
    conn.execute(
        "UPDATE pgbus.batches SET completed_jobs = 7, description = NULL WHERE batch_id ="
        " (SELECT s.batch_id FROM pgbus.workflows w JOIN pgbus.workflow_steps s"
        "  ON s.step_id = w.current_step_id WHERE w.workflow_id = %s)",
        (fanned,),
    )
    register(conn, "Quick", [{"name": "only"}])
    done = start(conn, "Quick")
    for s in take_steps(conn, "Quick"):
        end_step(conn, s["step_id"], "complete")
    return {
        "paused": paused,
        "gone": gone,
        "later": later,
        "late": late,
        "gated": gated,
        "fanned": fanned,
        "done": done,
    }


def test_list_shows_ongoing_runs_newest_first_with_their_sentences(db_url, runs):
    c = client(db_url)
    r = c.get("/workflows")
    assert r.status_code == 200
    ids = rows(r)
    assert runs["gone"] not in ids and runs["done"] not in ids
    assert set(runs["paused"]) <= set(ids)
    assert ids.index(runs["late"]) < ids.index(runs["paused"][0])  # newer first
    t = text(r)
    assert "Paused on capture : TimeoutError — resume or cancel" in t
    assert re.search(r"Overdue: welcome was due (2 h|1\d\d min) ago; the sweep sends it again", t)
    assert re.search(r"Runs welcome in (60|59) min", t)
    assert re.search(r"Waiting for signal payment_confirmed \(times out in (48 h|2 d)\)", t)
    assert "Waiting for batch Vendors#notify_vendors (7 of 12 jobs done)" in t
    assert "Workflows" in t and 'aria-current="page"' in r.text


def sentences(r) -> dict[str, str]:
    """Each listed run's sentence (its cell's HTML, entities decoded), by run id."""
    return {
        run: html.unescape(said.strip())
        for run, said in re.findall(
            r'<tr>\s*<td><a href="/workflows/([0-9a-f-]{36})">.*?<p class="sentence">(.*?)</p>',
            r.text,
            re.S,
        )
    }


def test_list_sentences_of_a_stalled_pause_running_queued_and_plain_wait(db_url, conn):
    # Stalled: its attempt ran past the stall threshold and the sweep paused the run.
    register(conn, "Stally", [{"name": "charge"}, {"name": "ship"}])
    stalled = start(conn, "Stally")
    (s,) = take_steps(conn, "Stally")
    conn.execute(
        "UPDATE pgbus.workflow_steps SET started_at = now() - interval '20 minutes'"
        " WHERE step_id = %s",
        (s["step_id"],),
    )
    conn.execute("SELECT pgbus.workflow_sweep_stalls(interval '15 minutes', 'pause')")
    # Running: its second attempt, begun three minutes ago.
    register(conn, "Busy", [{"name": "crunch"}])
    running = start(conn, "Busy")
    (s,) = take_steps(conn, "Busy")
    end_step(conn, s["step_id"], "reattempt", ERROR)
    (s,) = take_steps(conn, "Busy")
    conn.execute(
        "UPDATE pgbus.workflow_steps SET started_at = now() - interval '3 minutes'"
        " WHERE step_id = %s",
        (s["step_id"],),
    )
    # Queued: its step is due now and no worker has taken it yet.
    register(conn, "Prompt", [{"name": "send"}])
    queued = start(conn, "Prompt")
    # Waiting, on neither a signal nor a batch: the engine's own park always names one, so the
    # parked attempt's gate is cleared by hand (the sentence's fallback for such a row).
    register(conn, "Parked", [{"name": "hold", "wait_for": "go"}])
    waiting = start(conn, "Parked")
    (s,) = take_steps(conn, "Parked")
    end_step(conn, s["step_id"], "park")
    conn.execute(
        "UPDATE pgbus.workflow_steps SET wait_for = NULL, wait_deadline = NULL WHERE step_id = %s",
        (s["step_id"],),
    )
    assert [status(conn, w) for w in (stalled, running, queued, waiting)] == [
        "paused",
        "running",
        "ready",
        "waiting",
    ]
    said = sentences(client(db_url).get("/workflows"))
    assert said[stalled] == (
        "Paused on <code>charge</code>: the step stalled (its worker stopped answering)"
        " — resume or cancel"
    )
    assert said[running] == "Running <code>crunch</code> (attempt 2, for 3 min)"
    assert said[queued] == "<code>send</code> is queued for a worker"
    assert said[waiting] == "Waiting at <code>hold</code>"


@pytest.mark.parametrize(
    ("query", "expect"),
    [
        ("status=all", {"paused", "gone", "later", "late", "gated", "fanned", "done"}),
        ("status=waiting", {"gated", "fanned"}),
        ("status=cancelled", {"gone"}),
        ("status=finished", {"done"}),
        ("status=paused", {"paused"}),
        ("status=ready", {"later", "late"}),
        ("workflow_class=Welcome", {"later", "late"}),
        ("step=capture", {"paused"}),
        ("error_class=TimeoutError", {"paused"}),
        ("status=all&subject_type=Order&subject_id=gone", {"gone"}),
        ("status=all&ended_from=2000-01-01T00:00", {"gone", "done"}),
        ("status=all&ended_to=2000-01-01T00:00", set()),
        (
            "created_from=2000-01-01T00:00&created_to=2999-01-01T00:00",
            {"paused", "later", "late", "gated", "fanned"},
        ),
        ("created_from=2999-01-01T00:00", set()),
    ],
)
def test_every_filter(db_url, runs, query, expect):
    c = client(db_url)
    got = set(rows(c.get("/workflows?" + query)))
    want: set[str] = set()
    for k in expect:
        want |= set(runs[k]) if isinstance(runs[k], list) else {runs[k]}
    assert want <= got
    others = {
        v
        for k, vs in runs.items()
        if k not in expect
        for v in (vs if isinstance(vs, list) else [vs])
    }
    assert not (others & got), query


def test_workflow_id_filter_and_combined_filters(db_url, runs):
    c = client(db_url)
    one = runs["paused"][2]
    assert rows(c.get(f"/workflows?status=all&workflow_id={one}")) == [one]
    got = rows(
        c.get(
            "/workflows?status=paused&workflow_class=OrderFlow&subject_type=Order&subject_id=3&error_class=TimeoutError"
        )
    )
    assert got == [runs["paused"][3]]


@pytest.mark.parametrize(
    "query",
    [
        "status=sleeping",
        "workflow_id=nope",
        "created_from=yesterday",
        "ended_to=2026-13-01",
        "subject_type=Order",
        "subject_id=3",
        "before=garbage",
        "created_from=2026-02-01&created_to=2026-01-01",
        "workflow_class=" + "x" * 300,
    ],
)
def test_a_bad_filter_answers_400_in_plain_words(db_url, runs, query):
    r = client(db_url).get("/workflows?" + query)
    assert r.status_code == 400
    assert r.headers["content-type"].startswith("text/plain") and "Traceback" not in r.text


def test_keyset_paging_keeps_the_filters_and_visits_every_run_once(db_url, conn):
    paused_on_error(conn, "Many", 7)
    pgbus.configure(database_url=db_url, web_per_page=3)
    c = client(db_url)
    seen: list[str] = []
    url = "/workflows?workflow_class=Many&status=all"
    while url:
        r = c.get(url)
        assert r.status_code == 200
        seen += rows(r)
        m = re.search(r'<a href="([^"]+)" rel="next">', r.text)
        url = html.unescape(m.group(1)) if m else None
        if url:
            assert "workflow_class=Many" in url and "status=all" in url and "before=" in url
    assert len(seen) == 7 == len(set(seen))


def test_the_total_is_capped(db_url, conn, monkeypatch):
    from pgbus.web import workflow_pages

    paused_on_error(conn, "Capped", 4)
    monkeypatch.setattr(workflow_pages, "COUNT_CAP", 3)
    assert "3+ matching runs" in text(client(db_url).get("/workflows?workflow_class=Capped"))
    monkeypatch.setattr(workflow_pages, "COUNT_CAP", 10000)
    assert "4 matching runs" in text(client(db_url).get("/workflows?workflow_class=Capped"))


def test_the_total_is_counted_while_the_rows_are_read(db_url, runs):
    """The list's total is counted on a connection of its own at the same time as the page
    reads its rows (a filter's count may read every ongoing run: the page then costs the longer
    of the two, not both). Each side waits for the other to have begun: read one after the
    other, the first would wait in vain and the page would say so."""
    import threading

    from pgbus.data import DataSource

    begun = {"rows": threading.Event(), "count": threading.Event()}
    missed: list[str] = []

    class Watched(DataSource):
        def meet(self, mine: str, other: str) -> None:
            begun[mine].set()
            if not begun[other].wait(5):
                missed.append(f"{mine} ran without {other}")

        def workflow_runs(self, *a, **k):
            self.meet("rows", "count")
            return super().workflow_runs(*a, **k)

        def workflow_runs_count(self, *a, **k):
            self.meet("count", "rows")
            return super().workflow_runs_count(*a, **k)

    data = Watched(db_url)
    try:
        for path in ("/workflows?step=capture", "/workflows?step=capture&fragment=runs"):
            for e in begun.values():
                e.clear()
            r = client(db_url, data=data).get(path)
            assert r.status_code == 200 and missed == []
            # The page shows exactly the runs it counts: the five paused at capture.
            assert "5 matching runs" in text(r) and set(rows(r)) == set(runs["paused"])
    finally:
        data.close()


def test_the_runs_fragment(db_url, runs):
    c = client(db_url)
    page = c.get("/workflows?workflow_class=Welcome")
    assert (
        '<section id="runs" data-refresh="/workflows?workflow_class=Welcome&amp;fragment=runs"'
        in page.text
    )
    f = c.get("/workflows?workflow_class=Welcome&fragment=runs")
    assert (
        f.status_code == 200
        and "<section" not in f.text
        and set(rows(f)) == {runs["later"], runs["late"]}
    )


def test_subject_links_only_to_http_or_same_site(db_url, runs):
    urls = {"1": "https://crm.example/users/1", "2": "javascript:alert(1)"}
    pgbus.configure(
        database_url=db_url,
        workflow_subject_url=lambda t, i: urls.get(i) if t == "User" else f"/admin/{t}/{i}",
    )
    r = client(db_url).get("/workflows?status=all")
    assert 'href="https://crm.example/users/1"' in r.text
    assert "javascript:" not in r.text and "User 2" in text(r)
    assert 'href="/admin/Order/1"' in r.text


def test_a_subject_url_hook_that_raises_shows_text(db_url, runs, caplog):
    def boom(t, i):
        raise RuntimeError("no")

    pgbus.configure(database_url=db_url, workflow_subject_url=boom)
    with caplog.at_level(logging.WARNING, "pgbus.web"):
        r = client(db_url).get("/workflows")
    assert r.status_code == 200 and "Order 1" in text(r)
    assert "workflow_subject_url raised RuntimeError" in caplog.text


# -- the run's page ---------------------------------------------------------------------------


def test_run_page(db_url, conn, runs):
    run = runs["paused"][0]
    r = client(db_url).get(f"/workflows/{run}")
    assert r.status_code == 200
    t = text(r)
    assert "Paused on capture : TimeoutError — resume or cancel" in t
    assert '"api_token": "[FILTERED]"' in t and "s3cret" not in r.text
    assert '"type":"rangeBar"' in html.unescape(r.text)
    assert '<table aria-describedby="timeline-caption">' in r.text
    assert "host:1" in t and "rev-7" in t and "app/orders.py:12 in capture" in t
    assert "OSError : connection reset" in t
    assert "Paused `capture` by step" in t
    # the actions workflow_available_actions allows, no others
    verbs = set(re.findall(rf'action="/workflows/{run}/(\w+)"', r.text))
    allowed = conn.execute("SELECT pgbus.workflow_available_actions(%s)", (run,)).fetchone()[0]
    assert verbs == set(allowed) - {"reschedule"}
    assert "Retry `capture`" in t
    for form in re.findall(r"<form[^>]*>", r.text):
        if "/workflows/" in form and 'method="post"' in form:
            assert "data-confirm=" in form


def resume_label(c, run: str) -> str:
    """The words on the run page's Resume button."""
    form = re.search(
        rf'<form method="post" action="/workflows/{run}/resume".*?<button type="submit">([^<]*)</button>',
        c.get(f"/workflows/{run}").text,
        re.S,
    )
    assert form, "the run's page offers no Resume"
    return html.unescape(form.group(1))


def test_resume_after_the_paused_step_completed_continues_with_the_next_step(db_url, conn):
    """Paused by hand while its step ran, the run's Resume carries the step on; once the step
    has completed, Resume goes on to the next step and says which."""
    register(conn, "Onward", [{"name": "fetch"}, {"name": "store"}, {"name": "notify"}])
    run = start(conn, "Onward")
    (s,) = take_steps(conn, "Onward")
    conn.execute("SELECT pgbus.workflow_command(%s, 'pause', 'ops')", (run,))
    c = client(db_url)
    assert resume_label(c, run) == "Resume `fetch`"
    end_step(conn, s["step_id"], "complete")  # the step's end is recorded; the run stays paused
    assert status(conn, run) == "paused"
    assert resume_label(c, run) == "Continue with `store`"
    assert 'data-confirm="Continue with `store`?"' in html.unescape(c.get(f"/workflows/{run}").text)
    act(c, run, "resume")
    now = conn.execute(
        "SELECT w.status, w.current_step, s.status FROM pgbus.workflows w"
        " JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id WHERE w.workflow_id = %s",
        (run,),
    ).fetchone()
    assert now == ("ready", "store", "scheduled")


def test_run_page_timeline_table_matches_the_attempts(db_url, conn):
    register(conn, "Two", [{"name": "a"}, {"name": "b"}])
    run = start(conn, "Two")
    for s in take_steps(conn, "Two"):
        end_step(conn, s["step_id"], "complete")
    for s in take_steps(conn, "Two"):
        end_step(conn, s["step_id"], "complete")
    r = client(db_url).get(f"/workflows/{run}")
    chart = json.loads(html.unescape(re.search(r"data-chart='([^']*)'", r.text).group(1)))
    ran = next(s for s in chart["series"] if s["name"] == "Ran: completed")["data"]
    assert [d["x"] for d in ran] == ["a #1", "b #1"]
    assert chart["labels"] == ["a #1", "b #1"]  # the rows, in the attempts' order
    table = re.search(r'aria-describedby="timeline-caption">(.*?)</table>', r.text, re.S).group(1)
    assert re.findall(r"<tr><td>([ab] #1)</td><td>completed</td>", table) == ["a #1", "b #1"]
    assert "Finished" in text(r)
    verbs = set(re.findall(rf'action="/workflows/{run}/(\w+)"', r.text))
    assert verbs == {"rerun"}


def test_outdated_definition_and_rerun_links(db_url, conn, runs):
    run = runs["done"]
    conn.execute(
        "UPDATE pgbus.workflow_definitions SET digest = 'd2' WHERE workflow_class = 'Quick'"
    )
    c = client(db_url)
    assert "Started on an older definition of Quick" in text(c.get(f"/workflows/{run}"))
    r = act(c, run, "rerun")
    assert r.status_code == 303
    new = r.headers["location"].rsplit("/", 1)[1]
    assert new != run and status(conn, new) in ("ready", "running")
    assert f'href="/workflows/{run}"' in c.get(f"/workflows/{new}").text
    assert f'href="/workflows/{new}"' in c.get(f"/workflows/{run}").text
    # A rerun while the subject's rerun is still going is refused, in its own words.
    gone = runs["gone"]
    assert act(c, gone, "rerun").status_code == 303
    act(c, gone, "rerun")
    assert ("refused", "Not done: the subject already has an ongoing run.") in flash_text(
        c, f"/workflows/{gone}"
    )


@pytest.mark.parametrize("bad", ["nope", str(uuid.uuid4()), "1' OR '1'='1"])
def test_unknown_run_is_404(db_url, runs, bad):
    r = client(db_url).get(f"/workflows/{bad}")
    assert r.status_code == 404


# -- actions ----------------------------------------------------------------------------------


def test_resume_records_the_actor_and_reason_and_says_so(db_url, conn, runs):
    run = runs["paused"][0]
    pgbus.configure(database_url=db_url, web_actor=lambda request: "alice")
    c = client(db_url)
    r = act(c, run, "resume", {"reason": "  SMTP fixed  ", "return_to": f"/workflows/{run}"})
    assert r.status_code == 303 and r.headers["location"] == f"/workflows/{run}"
    assert ("ok", "Resumed") in flash_text(c, f"/workflows/{run}")
    assert status(conn, run) == "ready"
    ev = conn.execute(
        "SELECT actor, reason FROM pgbus.workflow_events WHERE workflow_id = %s AND event = 'resumed'",
        (run,),
    ).fetchone()
    assert ev == ("dashboard:alice", "SMTP fixed")
    assert "Resumed `capture` by dashboard:alice: SMTP fixed" in text(c.get(f"/workflows/{run}"))


@pytest.mark.parametrize(
    ("hook", "logged"),
    [
        (lambda request: "  ", "blank"),
        (lambda request: 42, "int"),
        (lambda request: 1 / 0, "ZeroDivisionError"),
    ],
)
def test_web_actor_falls_back_to_dashboard(db_url, conn, runs, hook, logged, caplog):
    run = runs["paused"][1]
    pgbus.configure(database_url=db_url, web_actor=hook)
    with caplog.at_level(logging.WARNING, "pgbus.web"):
        act(client(db_url), run, "cancel")
    assert status(conn, run) == "cancelled"
    actor = conn.execute(
        "SELECT actor FROM pgbus.workflow_events WHERE workflow_id = %s AND event = 'cancelled'",
        (run,),
    ).fetchone()[0]
    assert actor == "dashboard"
    assert "web_actor" in caplog.text and logged in caplog.text


def test_a_reason_over_1000_characters_is_refused_and_changes_nothing(db_url, conn, runs):
    run = runs["paused"][0]
    r = act(client(db_url), run, "cancel", {"reason": "x" * 1001})
    assert r.status_code == 400 and status(conn, run) == "paused"
    act(client(db_url), run, "cancel", {"reason": "y" * 1000})
    assert status(conn, run) == "cancelled"


def test_resume_at_run_now_skip_pause(db_url, conn, runs):
    c = client(db_url)
    run = runs["paused"][0]
    act(c, run, "resume_at", {"step": "receipt"})
    assert (
        conn.execute(
            "SELECT current_step FROM pgbus.workflows WHERE workflow_id = %s", (run,)
        ).fetchone()[0]
        == "receipt"
    )
    r = act(c, runs["paused"][1], "resume_at", {"step": "nope"})
    assert r.status_code == 303 and status(conn, runs["paused"][1]) == "paused"
    assert any("Not done" in t and "nope" in t for _, t in flash_text(c, "/workflows"))
    later = runs["later"]
    act(c, later, "run_now")
    due = conn.execute(
        "SELECT s.scheduled_at <= now() + interval '1 second' FROM pgbus.workflows w"
        " JOIN pgbus.workflow_steps s ON s.step_id = w.current_step_id WHERE w.workflow_id = %s",
        (later,),
    ).fetchone()[0]
    assert due
    act(c, later, "pause")
    assert status(conn, later) == "paused"


def test_signal_sends_once_per_key_and_checks_the_payload(db_url, conn, runs):
    c = client(db_url)
    run = runs["later"]
    page = c.get(f"/workflows/{run}").text
    key = re.search(r'name="idempotency_key" value="([^"]+)"', page).group(1)
    assert key != re.search(
        r'name="idempotency_key" value="([^"]+)"', c.get(f"/workflows/{run}").text
    ).group(1)
    form = {"name": "payment_confirmed", "payload": '{"amount": 5}', "idempotency_key": key}
    act(c, run, "signal", form)
    assert ("ok", "Signal sent `payment_confirmed`") in flash_text(c, f"/workflows/{run}")
    act(c, run, "signal", form)  # the double submit
    assert ("ok", "Signal already delivered") in flash_text(c, f"/workflows/{run}")
    assert (
        conn.execute(
            "SELECT count(*) FROM pgbus.workflow_signals WHERE workflow_id = %s", (run,)
        ).fetchone()[0]
        == 1
    )
    # Not a JSON object; NaN (not JSON); a NUL character PostgreSQL cannot store; nesting
    # deeper than a parser's recursion: each a 400 with its reason, never a 500.
    for payload, says in (
        ("[1, 2]", "must be a JSON object"),
        ("not json", "not valid JSON"),
        ('"text"', "must be a JSON object"),
        ('{"n": NaN}', "not valid JSON"),
        ('{"u": "a\\u0000b"}', "NUL character"),
        ('{"a\\u0000": 1}', "NUL character"),
        ('{"deep": ' + "[" * 20_000 + "]" * 20_000 + "}", "nested too deeply"),
    ):
        r = act(c, run, "signal", {"name": "x", "payload": payload})
        assert r.status_code == 400 and says in r.text, (payload[:30], r.status_code, r.text[:200])
    # A payload up to workflow_max_payload_size is sent, however long the form field.
    long = json.dumps({"note": "x" * 20_000})
    act(c, run, "signal", {"name": "long", "payload": long})
    assert ("ok", "Signal sent `long`") in flash_text(c, f"/workflows/{run}")
    conn.execute(
        "DELETE FROM pgbus.workflow_signals WHERE workflow_id = %s AND name = 'long'", (run,)
    )
    conn.execute("SELECT pgbus.setting_set('workflow_max_payload_size', '300')")
    r = act(c, run, "signal", {"name": "big", "payload": json.dumps({"b": "x" * 400})})
    assert r.status_code == 303
    assert any("too large" in t for _, t in flash_text(c, f"/workflows/{run}"))
    assert (
        conn.execute(
            "SELECT count(*) FROM pgbus.workflow_signals WHERE workflow_id = %s", (run,)
        ).fetchone()[0]
        == 1
    )


# Every verb a status does not allow is refused with the run's real status and changes nothing.
REFUSED = {
    "done": ["resume", "resume_at", "run_now", "skip", "signal", "pause", "cancel"],
    "gone": ["resume", "resume_at", "run_now", "skip", "signal", "pause", "cancel"],
    "paused": ["run_now", "skip", "pause", "rerun"],
    "later": ["resume", "resume_at", "skip", "rerun"],
}


@pytest.mark.parametrize(("which", "verb"), [(w, v) for w, vs in REFUSED.items() for v in vs])
def test_refusal_of_every_verb_a_status_does_not_allow(db_url, conn, runs, which, verb):
    run = runs[which][0] if isinstance(runs[which], list) else runs[which]
    before = conn.execute(
        "SELECT status, updated_at, (SELECT count(*) FROM pgbus.workflow_events e WHERE e.workflow_id = w.workflow_id)"
        " FROM pgbus.workflows w WHERE workflow_id = %s",
        (run,),
    ).fetchone()
    c = client(db_url)
    r = act(c, run, verb, {"step": "capture", "name": "s", "payload": "{}"})
    assert r.status_code == 303
    (kind, said), *_ = flash_text(c, f"/workflows/{run}")
    assert kind == "refused" and said == f"Not done: the run is {before[0]} now."
    after = conn.execute(
        "SELECT status, updated_at, (SELECT count(*) FROM pgbus.workflow_events e WHERE e.workflow_id = w.workflow_id)"
        " FROM pgbus.workflows w WHERE workflow_id = %s",
        (run,),
    ).fetchone()
    assert after == before


def test_actions_need_the_csrf_token_and_a_known_verb(db_url, conn, runs):
    c = client(db_url)
    run = runs["paused"][0]
    assert c.post(f"/workflows/{run}/cancel", data={}).status_code == 403
    page = f"/workflows/{run}"
    assert post(c, f"/workflows/{run}/explode", page=page).status_code == 404
    assert post(c, f"/workflows/{uuid.uuid4()}/cancel", page=page).status_code == 303
    assert ("refused", "Not done: no such run (it may have been deleted).") in flash_text(c, page)
    assert status(conn, run) == "paused"


def wait_for_lock_waits(db_url: str, n: int, query_like: str, what: str) -> None:
    """Until n sessions of this database wait on a lock, running a query LIKE query_like."""
    with psycopg.connect(db_url, autocommit=True) as probe:
        wait_until(
            lambda: (
                probe.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event_type = 'Lock' AND query LIKE %s",
                    (query_like,),
                ).fetchone()[0]
                >= n
            ),
            what=what,
        )


def test_two_operators_resume_and_cancel_at_once(db_url, conn, runs):
    """Both press on one paused run at the same moment: one wins, the other is told the truth."""
    import threading

    run = runs["paused"][0]
    c1, c2 = client(db_url), client(db_url)
    # Hold the run's lock so both requests queue behind it, then let go.
    blocker = psycopg.connect(db_url)
    blocker.execute("SELECT 1 FROM pgbus.workflows WHERE workflow_id = %s FOR UPDATE", (run,))
    tokens = {}
    for name, c in (("a", c1), ("b", c2)):
        tokens[name] = re.search(
            r'name="csrf_token" value="([0-9a-f]{64})"', c.get(f"/workflows/{run}").text
        ).group(1)
    out = {}

    def press(name, c, verb):
        out[name] = c.post(f"/workflows/{run}/{verb}", data={"csrf_token": tokens[name]})

    threads = [
        threading.Thread(target=press, args=("a", c1, "resume")),
        threading.Thread(target=press, args=("b", c2, "cancel")),
    ]
    for t in threads:
        t.start()
    wait_for_lock_waits(db_url, 2, "%", "both requests waiting on the run's row")
    blocker.rollback()
    blocker.close()
    for t in threads:
        t.join(30)
    said = dict(flash_text(c1, "/workflows")), dict(flash_text(c2, "/workflows"))
    final = status(conn, run)
    if final == "cancelled":
        # cancel won, or resume went first and cancel then cancelled the ready run
        assert "ok" in said[1]
    else:
        assert final == "ready"
        assert said[1].get("refused") == f"Not done: the run is {final} now." or "ok" in said[1]
    kinds = [k for d in said for k in d]
    assert kinds.count("ok") >= 1
    events = [
        e
        for (e,) in conn.execute(
            "SELECT event FROM pgbus.workflow_events WHERE workflow_id = %s AND actor LIKE 'dashboard%%'"
            " AND event IN ('resumed', 'cancelled') ORDER BY event_id",
            (run,),
        )
    ]
    assert events in (["resumed", "cancelled"], ["cancelled"], ["resumed"])


# -- attention --------------------------------------------------------------------------------


def test_attention_groups_and_bulk_resume(db_url, conn, runs):
    c = client(db_url)
    r = c.get("/workflows/attention")
    assert r.status_code == 200
    t = text(r)
    assert re.search(r"OrderFlow capture Paused on an error TimeoutError 5 .* gateway timed out", t)
    assert "Welcome welcome Overdue" in t
    # A group links to the list of its class's runs at its step with its error class, in the
    # status its reason implies: the 5 paused OrderFlow runs, not the other ongoing ones.
    href = html.unescape(re.search(r'<a href="([^"]*)">OrderFlow</a>', r.text)[1])
    assert "status=paused" in href and "error_class=TimeoutError" in href
    assert re.search(r"\b5 matching runs\b", text(c.get(href)))
    # An overdue group's runs are ready, which resume refuses: it offers Cancel only.
    welcome = c.get("/workflows/attention?workflow_class=Welcome").text
    assert 'aria-label="Cancel Welcome welcome overdue"' in welcome
    assert 'aria-label="Resume Welcome' not in welcome
    assert 'aria-label="Resume OrderFlow capture paused on an error"' in r.text
    assert c.get("/workflows/attention?workflow_class=Welcome").text.count("<tr>") == 2
    form = {
        "workflow_class": "OrderFlow",
        "step_name": "capture",
        "stuck_reason": "paused_error",
        "error_class": "TimeoutError",
    }
    # one of them moves on before the press: resumed by someone else, so it is no longer stuck
    conn.execute("SELECT pgbus.workflow_command(%s, 'resume', 'other')", (runs["paused"][0],))
    r = post(c, "/workflows/attention/resume", form, page="/workflows/attention")
    assert r.status_code == 303
    assert ("ok", "Resumed 4") in flash_text(c, "/workflows/attention")
    assert all(status(conn, w) == "ready" for w in runs["paused"])


def test_bulk_answers_moved_on_when_a_worker_finishes_runs_meanwhile(db_url, conn):
    """The group is read, then a worker ends some runs before the bulk reaches them."""
    ids = paused_on_error(conn, "Racy", 6)
    # Two runs are resumed and finished by a worker between the page and the press.
    for w in ids[:2]:
        conn.execute("SELECT pgbus.workflow_command(%s, 'resume', 'worker')", (w,))
    out = conn.execute(
        "SELECT pgbus.workflow_attention_act('resume', 'Racy', 'capture', 'paused_error', 'TimeoutError', 'dashboard:x')"
    ).fetchone()[0]
    assert out["done"] == 4 and out["moved_on"] == 0  # they were no longer in the group at all
    # Now a real interleaving: the bulk waits on a run a worker holds, which the worker ends.
    ids2 = paused_on_error(conn, "Racy2", 3)
    worker = psycopg.connect(db_url)
    worker.execute(
        "SELECT pgbus.workflow_command(%s, 'resume', 'worker')", (ids2[0],)
    )  # holds the lock
    import threading

    result = {}

    def press():
        with psycopg.connect(db_url, autocommit=True) as c2:
            result["out"] = c2.execute(
                "SELECT pgbus.workflow_attention_act('cancel', 'Racy2', 'capture', 'paused_error', 'TimeoutError', 'dashboard:y')"
            ).fetchone()[0]

    t = threading.Thread(target=press)
    t.start()
    wait_for_lock_waits(db_url, 1, "%workflow_attention_act%", "the bulk cancel waiting on the run")
    worker.commit()
    worker.close()
    t.join(30)
    assert result["out"]["done"] == 2 and result["out"]["moved_on"] == 1
    assert result["out"]["message"] == "Cancelled 2; 1 had already moved on"
    assert status(conn, ids2[0]) == "ready"


@pytest.mark.parametrize(
    "form",
    [
        {
            "workflow_class": "OrderFlow",
            "step_name": "capture",
            "stuck_reason": "bored",
            "error_class": "TimeoutError",
        },
        {
            "workflow_class": " ",
            "step_name": "capture",
            "stuck_reason": "paused_error",
            "error_class": "TimeoutError",
        },
        {"step_name": "capture", "stuck_reason": "paused_error"},
        # A reason's words on the page are not a reason.
        {
            "workflow_class": "OrderFlow",
            "step_name": "capture",
            "stuck_reason": "Paused on an error",
            "error_class": "TimeoutError",
        },
        {
            "workflow_class": "OrderFlow",
            "step_name": "capture",
            "stuck_reason": "",
            "error_class": "TimeoutError",
        },
    ],
)
def test_a_forged_group_is_refused_and_changes_nothing(db_url, conn, runs, form):
    c = client(db_url)
    for verb in ("cancel", "resume"):
        r = post(c, f"/workflows/attention/{verb}", form, page="/workflows/attention")
        assert r.status_code == 400, verb
    assert all(status(conn, w) == "paused" for w in runs["paused"])


def test_the_page_knows_exactly_the_stuck_reasons_the_engine_gives(conn):
    from pgbus.web.workflow_pages import STUCK_REASONS

    engine = conn.execute("SELECT pgbus.workflow_stuck_reasons()").fetchone()[0]
    assert sorted(STUCK_REASONS) == sorted(engine)


def test_a_bulk_action_that_reaches_its_cap_says_more_may_wait(db_url, conn):
    """501 runs paused by hand form one group: the bulk acts on the oldest 500 and says more
    may wait; pressed again, it acts on the last one and says nothing more."""
    from pgbus.data import WORKFLOW_BULK_LIMIT

    assert WORKFLOW_BULK_LIMIT == 500
    register(conn, "Heaps", [{"name": "only"}])
    conn.execute(
        "SELECT pgbus.workflow_command(r.workflow_id, 'pause', 'ops')"
        " FROM generate_series(1, 501) i,"
        " LATERAL pgbus.workflow_start('Heaps', arguments => jsonb_build_object('i', i)) r"
    )
    c = client(db_url)
    page = c.get("/workflows/attention?workflow_class=Heaps").text
    assert 'data-confirm="Cancel up to 500 Heaps runs (paused by hand at only)?"' in page
    form = {"workflow_class": "Heaps", "step_name": "only", "stuck_reason": "paused_manual"}
    r = post(c, "/workflows/attention/cancel", form, page="/workflows/attention")
    assert r.status_code == 303
    assert flash_text(c, "/workflows/attention") == [("ok", "Cancelled 500; more may wait")]
    left = conn.execute(
        "SELECT status, count(*) FROM pgbus.workflows WHERE workflow_class = 'Heaps' GROUP BY 1"
        " ORDER BY 1"
    ).fetchall()
    assert left == [("cancelled", 500), ("paused", 1)]
    post(c, "/workflows/attention/cancel", form, page="/workflows/attention")
    assert flash_text(c, "/workflows/attention") == [("ok", "Cancelled 1")]


def test_home_card_and_nav(db_url, conn, runs):
    r = client(db_url).get("/")
    card = conn.execute("SELECT pgbus.workflow_home_card()").fetchone()[0]
    assert (
        f"{card['ongoing']} ongoing ({card['paused']} paused) · {card['attention']} need attention"
        in text(r)
    )
    assert card["paused"] == 5 and card["attention"] >= 6
    assert '<a href="/workflows"' in r.text
    assert "need attention" in client(db_url).get("/?fragment=cards").text

"""Dashboard actions: CSRF, auth and the operator's name on the audit row, every action's
answer shown as a toast, refusals as their real outcome, races, and a paused queue honoured by
a real worker."""

from __future__ import annotations

import base64
import threading

import pytest

from tests.py.sample_jobs import Record
from tests.py.support import count_effects, running_worker, wait_until
from tests.py.web_support import client, csrf, dead_letter, enqueue, fail, flash_text, post

Q = "pgbus_default"


def audit(conn):
    return conn.execute(
        "SELECT actor, action, outcome ->> 'code' FROM pgbus.operator_actions ORDER BY id"
    ).fetchall()


def test_a_post_without_or_with_a_wrong_csrf_token_is_403_and_changes_nothing(db_url, conn):
    enqueue(conn, Q)
    c = client(db_url)
    assert c.post(f"/queues/{Q}/pause", data={}).status_code == 403
    assert c.post(f"/queues/{Q}/pause", data={"csrf_token": "0" * 64}).status_code == 403
    other = client(db_url)
    stolen = csrf(other)  # a token from another browser (cookie) does not fit this one
    csrf(c)
    r = c.post(f"/queues/{Q}/pause", data={"csrf_token": stolen})
    assert r.status_code == 403 and r.headers["content-type"].startswith("text/plain")
    assert conn.execute("SELECT count(*) FROM pgbus.queue_pauses").fetchone()[0] == 0
    assert audit(conn) == []


def test_the_csrf_cookie_is_httponly_and_strict(db_url):
    c = client(db_url)
    r = c.get("/")
    cookie = r.headers["set-cookie"]
    assert "pgbus_csrf=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie


def test_pause_and_resume_redirect_with_a_toast_and_record_the_operator(db_url, conn):
    enqueue(conn, Q)
    c = client(db_url, web_auth=lambda request: "alice")
    r = post(c, f"/queues/{Q}/pause", {"reason": "deploy", "return_to": f"/queues/{Q}"})
    assert r.status_code == 303 and r.headers["location"] == f"/queues/{Q}"
    assert flash_text(c, f"/queues/{Q}") == [
        ("ok", "Paused pgbus_default: workers leave its messages until it is resumed")
    ]
    assert flash_text(c, f"/queues/{Q}") == []  # a flash is shown once
    assert "Paused" in c.get(f"/queues/{Q}").text
    r = post(c, f"/queues/{Q}/pause")
    assert r.status_code == 303
    assert flash_text(c, "/") == [("refused", "Not done: pgbus_default was already paused")]
    post(c, f"/queues/{Q}/resume")
    assert audit(conn) == [
        ("dashboard:alice", "queue_pause", "paused"),
        ("dashboard:alice", "queue_pause", "already_paused"),
        ("dashboard:alice", "queue_resume", "resumed"),
    ]


def test_return_to_must_be_a_page_of_this_app(db_url, conn):
    enqueue(conn, Q)
    c = client(db_url)
    for evil in ("https://evil.example/", "//evil.example/", "/\\evil", "javascript:alert(1)"):
        r = post(c, f"/queues/{Q}/pause", {"return_to": evil})
        assert r.headers["location"] == f"/queues/{Q}", evil
        post(c, f"/queues/{Q}/resume")


def test_a_paused_queue_is_left_alone_by_a_real_worker_until_resumed(db_url, effects):
    c = client(db_url)
    Record.perform_later("while-paused")
    post(c, f"/queues/{Q}/pause")
    assert flash_text(c, "/jobs")[0][0] == "ok"
    with running_worker(threads=1):
        # The worker polls; give it several rounds to (not) take the job.
        wait_until(
            lambda: effects.execute(
                "SELECT count(*) FROM pgbus.processes WHERE kind = 'worker'"
            ).fetchone()[0],
            what="the worker's registration",
        )
        threading.Event().wait(2.5)
        assert count_effects(effects, "done") == 0
        assert "Queue paused" in c.get("/jobs").text
        post(c, f"/queues/{Q}/resume")
        wait_until(lambda: count_effects(effects, "done") == 1, what="the job after resume")


def test_retry_now_and_discard_of_a_failed_job(db_url, conn):
    ids = enqueue(conn, Q, n=2)
    fail(conn, Q, ids[0])
    c = client(db_url)
    post(c, f"/jobs/{Q}/{ids[0]}/retry")
    assert flash_text(c, "/jobs") == [
        ("ok", f"Message {ids[0]} of {Q} runs as soon as a worker is free")
    ]
    vt_due = conn.execute(f"SELECT vt <= now() FROM pgmq.q_{Q} WHERE msg_id = %s", (ids[0],))
    assert vt_due.fetchone()[0]
    post(c, f"/jobs/{Q}/{ids[0]}/discard")
    assert flash_text(c, "/jobs") == [("ok", f"Discarded message {ids[0]} of {Q}")]
    post(c, f"/jobs/{Q}/{ids[0]}/discard")
    assert flash_text(c, "/jobs") == [
        ("refused", "Not done: the message is no longer in the queue")
    ]
    assert conn.execute("SELECT count(*) FROM pgbus.job_failures").fetchone()[0] == 0


def test_bulk_actions_say_how_many_were_done_and_how_many_had_gone(db_url, conn):
    ids = enqueue(conn, Q, n=4)
    c = client(db_url)
    items = [f"{Q}:{i}" for i in ids] + [f"{Q}:999999"]
    r = c.post("/jobs/bulk/discard-selected", data={"csrf_token": csrf(c), "item": items})
    assert r.status_code == 303
    assert flash_text(c, "/jobs") == [("ok", "Discarded 4; 1 had already gone")]
    r = c.post("/jobs/bulk/discard-selected", data={"csrf_token": csrf(c)})
    assert r.status_code == 400 and r.text == "Nothing selected"
    r = c.post("/jobs/bulk/discard-selected", data={"csrf_token": csrf(c), "item": f"{Q}:²"})
    assert r.status_code == 400 and r.text == "Bad selection"
    r = c.post(f"/dead-letters/{Q}_dlq/%C2%B2/retry", data={"csrf_token": csrf(c)})
    assert r.status_code == 404
    too_many = [f"{Q}:{i}" for i in range(1, 1002)]
    r = c.post("/jobs/bulk/discard-selected", data={"csrf_token": csrf(c), "item": too_many})
    assert r.status_code == 400


def test_discard_all_enqueued_is_bounded_per_press(db_url, conn):
    enqueue(conn, Q, n=5)
    c = client(db_url)
    post(c, "/jobs/bulk/discard-enqueued", {"queue": Q})
    assert flash_text(c, "/jobs") == [("ok", "Discarded 5")]
    assert conn.execute(f"SELECT count(*) FROM pgmq.q_{Q}").fetchone()[0] == 0


def test_dead_letter_retry_and_discard(db_url, conn):
    ids = enqueue(conn, Q, n=2)
    dead_letter(conn, Q, ids[0])
    dead_letter(conn, Q, ids[1])
    dl = [r[0] for r in conn.execute(f"SELECT msg_id FROM pgmq.q_{Q}_dlq ORDER BY 1")]
    c = client(db_url)
    page = c.get(f"/dead-letters/{Q}_dlq/{dl[0]}")
    assert page.status_code == 200 and "ValueError" in page.text
    post(c, f"/dead-letters/{Q}_dlq/{dl[0]}/retry")
    [(kind, text)] = flash_text(c, "/dead-letters")
    assert kind == "ok" and text.startswith(f"Dead letter {dl[0]} went back to {Q} as message ")
    post(c, "/dead-letters/bulk/discard-all")
    assert flash_text(c, "/dead-letters") == [("ok", "Discarded 1")]
    assert conn.execute(f"SELECT count(*) FROM pgmq.q_{Q}_dlq").fetchone()[0] == 0
    assert conn.execute(f"SELECT count(*) FROM pgmq.q_{Q}").fetchone()[0] == 1


def test_two_operators_retrying_the_same_dead_letter_one_wins_the_other_is_told(db_url, conn):
    [mid] = enqueue(conn, Q)
    dead_letter(conn, Q, mid)
    [dl] = [r[0] for r in conn.execute(f"SELECT msg_id FROM pgmq.q_{Q}_dlq")]
    ann = client(db_url, web_auth=lambda r: "ann")
    bob = client(db_url, web_auth=lambda r: "bob")
    tokens = {"ann": csrf(ann), "bob": csrf(bob)}
    # Hold the dead letter's row so both requests are in flight at once, then let go.
    holder = conn.connection if hasattr(conn, "connection") else conn
    import psycopg

    blocker = psycopg.connect(db_url)
    blocker.execute(f"SELECT 1 FROM pgmq.q_{Q}_dlq WHERE msg_id = %s FOR UPDATE", (dl,))
    results = {}

    def press(name, c):
        results[name] = c.post(
            f"/dead-letters/{Q}_dlq/{dl}/retry", data={"csrf_token": tokens[name]}
        ).status_code

    threads = [threading.Thread(target=press, args=(n, c)) for n, c in (("ann", ann), ("bob", bob))]
    for t in threads:
        t.start()
    wait_until(
        lambda: (
            holder.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND query LIKE '%dead_letter_retry%'"
            ).fetchone()[0]
            == 2
        ),
        what="both retries waiting on the row",
    )
    blocker.rollback()
    blocker.close()
    for t in threads:
        t.join(30)
    assert results == {"ann": 303, "bob": 303}
    outcomes = sorted(
        conn.execute(
            "SELECT outcome ->> 'code' FROM pgbus.operator_actions WHERE action = 'dead_letter_retry'"
        ).fetchall()
    )
    assert outcomes == [("gone",), ("retried",)]
    toasts = sorted(flash_text(ann, "/dead-letters") + flash_text(bob, "/dead-letters"))
    assert toasts[0][0] == "ok" and toasts[1] == (
        "refused",
        "Not done: the dead letter is no longer there (retried or discarded already)",
    )
    assert conn.execute(f"SELECT count(*) FROM pgmq.q_{Q}").fetchone()[0] == 1


def test_purge_and_delete_a_queue(db_url, conn):
    enqueue(conn, "pgbus_tmp", n=3)
    c = client(db_url)
    post(c, "/queues/pgbus_tmp/purge")
    assert flash_text(c, "/queues") == [("ok", "Purged pgbus_tmp: 3 message(s) removed")]
    r = post(c, "/queues/pgbus_tmp/delete", {"return_to": "/queues/pgbus_tmp"})
    assert r.headers["location"] == "/queues/pgbus_tmp"  # return_to wins; the page then 404s
    assert c.get("/queues/pgbus_tmp").status_code == 404
    post(c, "/queues/pgbus_tmp/delete")
    assert flash_text(c, "/queues") == [("refused", "Not done: there is no queue pgbus_tmp")]


def test_auth_refuses_with_401_and_names_the_operator(db_url, conn):
    from pgbus.web import basic_auth

    c = client(db_url, web_auth=basic_auth("s3cret"))
    r = c.get("/")
    assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Basic")
    assert c.get("/livez").status_code == 200  # probes stay open
    good = "Basic " + base64.b64encode(b"carol:s3cret").decode()
    bad = "Basic " + base64.b64encode(b"carol:nope").decode()
    assert c.get("/", headers={"authorization": bad}).status_code == 401
    c.headers["authorization"] = good
    assert "Signed in as carol" in c.get("/").text
    enqueue(conn, Q)
    post(c, f"/queues/{Q}/pause")
    assert audit(conn)[-1][0] == "dashboard:carol"


def test_a_failing_auth_callable_refuses(db_url):
    def broken(request):
        raise RuntimeError("auth backend down")

    assert client(db_url, web_auth=broken).get("/").status_code == 401


def test_async_auth_and_bearer_token(db_url):
    from pgbus.web import any_of, basic_auth, bearer_auth

    async def who(request):
        return request.headers.get("x-user")

    assert client(db_url, web_auth=who).get("/", headers={"x-user": "dan"}).status_code == 200
    both = client(db_url, web_auth=any_of(basic_auth("pw"), bearer_auth("tok")))
    assert both.get("/api/metrics", headers={"authorization": "Bearer tok"}).status_code == 200
    assert both.get("/api/metrics", headers={"authorization": "Bearer no"}).status_code == 401


@pytest.mark.parametrize("field", ["reason"])
def test_oversized_fields_are_refused(db_url, conn, field):
    enqueue(conn, Q)
    c = client(db_url)
    r = c.post(f"/queues/{Q}/pause", data={"csrf_token": csrf(c), field: "x" * 5000})
    assert r.status_code == 400
    r = c.post(f"/queues/{Q}/pause", data={"csrf_token": csrf(c), field: "x" * 600})
    assert r.status_code == 400 and "500 characters" in r.text
    r = c.post(
        f"/queues/{Q}/pause",
        content=b"csrf_token=" + b"a" * 300_000,
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 413
    assert conn.execute("SELECT count(*) FROM pgbus.queue_pauses").fetchone()[0] == 0


def test_the_dispatcher_trims_the_audit_log(db_url, conn):
    from pgbus.dispatcher import Dispatcher, default_duties

    conn.execute(
        "INSERT INTO pgbus.operator_actions (actor, action, outcome, at) VALUES"
        " ('dashboard:a', 'queue_pause', '{}', now() - interval '100 days'),"
        " ('dashboard:a', 'queue_pause', '{}', now() - interval '1 day')"
    )
    done = Dispatcher([d for d in default_duties() if d.name == "cleanup_operator_actions"]).tick()
    assert done["cleanup_operator_actions"] == 1
    assert conn.execute("SELECT count(*) FROM pgbus.operator_actions").fetchone()[0] == 1

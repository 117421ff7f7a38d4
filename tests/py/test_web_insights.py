"""Workflow insights by class on the dashboard, against the real engine: the list of classes and
one class's page, their windows and fragments, 404 for unknown classes, and that every count
of runs links to the Workflows list of exactly those runs (the list's own count is compared)."""

from __future__ import annotations

import html
import re

import pytest
from psycopg.types.json import Jsonb

from tests.py.web_support import client
from tests.py.workflow_page_support import ERROR, end_step, register, start, take_steps

LINK = re.compile(r'<a href="([^"]+)" data-count="(\d+)">')


def text(r) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", r.text)).split())


def counted_links(r) -> list[tuple[str, int]]:
    return [(html.unescape(href), int(n)) for href, n in LINK.findall(r.text)]


def list_count(c, href: str) -> int:
    page = c.get(href)
    assert page.status_code == 200, (href, page.text[:300])
    m = re.search(r"([\d,]+)\+? matching runs?", text(page))
    assert m, href
    return int(m.group(1).replace(",", ""))


@pytest.fixture
def shop(conn):
    """ShopFlow (charge, ship): 2 finished, 1 paused on error at charge, 1 cancelled at charge,
    1 ready at ship, 1 running at ship; and a run of a class whose definition is gone."""
    register(conn, "ShopFlow", [{"name": "charge"}, {"name": "ship"}])
    runs = [start(conn, "ShopFlow", ("Order", str(i))) for i in range(6)]
    steps = {s["workflow_id"]: s["step_id"] for s in take_steps(conn, "ShopFlow", 10)}
    end_step(conn, steps[runs[0]], "complete")
    end_step(conn, steps[runs[1]], "complete")
    end_step(conn, steps[runs[2]], "pause", ERROR)
    conn.execute("SELECT pgbus.workflow_command(%s, 'cancel', 'ops')", (runs[3],))
    end_step(conn, steps[runs[4]], "complete")
    end_step(conn, steps[runs[5]], "complete")
    ship = {s["workflow_id"]: s["step_id"] for s in take_steps(conn, "ShopFlow", 10)}
    end_step(conn, ship[runs[0]], "complete")
    end_step(conn, ship[runs[1]], "complete")
    # runs[4]'s ship was read and not ended: running; runs[5]'s ship goes back to ready.
    conn.execute(
        "UPDATE pgbus.workflow_steps SET status = 'scheduled', started_at = NULL,"
        " body_started_at = NULL WHERE step_id = %s",
        (ship[runs[5]],),
    )
    conn.execute("UPDATE pgbus.workflows SET status = 'ready' WHERE workflow_id = %s", (runs[5],))
    register(conn, "GoneFlow", [{"name": "only"}])
    start(conn, "GoneFlow")
    conn.execute("DELETE FROM pgbus.workflow_definitions WHERE workflow_class = 'GoneFlow'")
    return runs


def test_the_workflows_page_links_to_insights_by_class(db_url):
    r = client(db_url).get("/workflows")
    assert 'href="/workflows/definitions">Insights by class</a>' in r.text


def test_the_list_has_one_row_per_class_with_its_counts(db_url, shop):
    c = client(db_url)
    r = c.get("/workflows/definitions")
    assert r.status_code == 200
    rows = dict(re.findall(r'<tr data-class="([^"]+)">(.*?)</tr>', r.text, re.S))
    assert {"ShopFlow", "GoneFlow"} <= set(rows)
    shop_row = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", rows["ShopFlow"])).split())
    # ongoing 3 (paused, running, ready), paused 1, attention 1, finished 2, cancelled 1
    assert shop_row.startswith("ShopFlow definition not loaded 3 1 1 2 1"), shop_row
    assert "definition not loaded" in rows["GoneFlow"]


def test_every_count_on_the_list_links_to_exactly_those_runs(db_url, shop):
    c = client(db_url)
    for window in ("1h", "24h", "7d", "30d"):
        links = counted_links(c.get(f"/workflows/definitions?window={window}"))
        assert len(links) >= 8
        for href, n in links:
            assert list_count(c, href) == n, (window, href)


def test_the_class_page_shows_the_pipeline_in_order(db_url, shop):
    c = client(db_url)
    r = c.get("/workflows/definitions/ShopFlow")
    assert r.status_code == 200
    assert re.findall(r'<tr data-step="([^"]+)">', r.text)[:2] == ["charge", "ship"]
    words = text(r)
    assert "1 run need attention" in words or "1 run needs attention" in words
    assert "few samples" in words
    assert (
        "data-chart=" in r.text and "throughput-caption" in r.text and "durations-caption" in r.text
    )


def test_every_count_on_the_class_page_links_to_exactly_those_runs(db_url, shop):
    c = client(db_url)
    for window in ("1h", "24h", "7d", "30d"):
        links = counted_links(c.get(f"/workflows/definitions/ShopFlow?window={window}"))
        # pipeline (ready, running, paused), throughput (started, finished, cancelled),
        # funnel (started, finished, cancelled, ongoing, and where runs are now)
        assert len(links) >= 10, window
        for href, n in links:
            assert list_count(c, href) == n, (window, href)


def test_the_attention_link_opens_the_groups_of_the_class(db_url, shop):
    c = client(db_url)
    r = c.get("/workflows/definitions/ShopFlow")
    href = html.unescape(re.search(r'<a href="([^"]*attention[^"]*)">', r.text).group(1))
    assert href == "/workflows/attention?workflow_class=ShopFlow"
    groups = c.get(href)
    assert groups.status_code == 200 and "TimeoutError" in groups.text


def test_fragments_are_the_regions(db_url, shop):
    c = client(db_url)
    for region in ("pipeline", "charts", "funnel", "revisions"):
        r = c.get(f"/workflows/definitions/ShopFlow?window=7d&fragment={region}")
        assert r.status_code == 200 and "<section" not in r.text, region
    assert c.get("/workflows/definitions?fragment=definitions").status_code == 200
    assert c.get("/workflows/definitions/ShopFlow?fragment=nope").status_code == 404


def test_a_class_no_definition_or_run_has_is_404_and_never_imported(db_url, shop):
    c = client(db_url)
    for name in ("NoSuchFlow", "os.system", "tests.py.sample_workflows.Nope", "a%00b", "x" * 300):
        assert c.get(f"/workflows/definitions/{name}").status_code == 404, name
    import sys

    assert "tests.py.sample_workflows.Nope" not in sys.modules
    # A class known only from its runs has a page.
    assert c.get("/workflows/definitions/GoneFlow").status_code == 200


def test_class_names_with_slashes_and_url_characters_have_their_page(db_url, conn):
    """A class name is any text: the list links each to its own page, which shows it; a name
    padded with spaces is another name (404)."""
    names = ["billing/Invoice", "a b?c#d%e&f+g", "x/../y"]
    for name in names:
        conn.execute(
            "SELECT pgbus.workflow_register(%s, '[{\"name\": \"only\"}]', 'd1', 'odd_names')",
            (name,),
        )
        start(conn, name)
    c = client(db_url)
    r = c.get("/workflows/definitions")
    assert r.status_code == 200, r.text[:300]
    for name in names:
        row = re.search(
            rf'<tr data-class="{re.escape(html.escape(name))}">.*?<a href="([^"]+)"', r.text, re.S
        )
        assert row, name
        href = html.unescape(row.group(1))
        page = c.get(href)
        assert page.status_code == 200, (name, href)
        assert f"<h1>{html.escape(name)} " in page.text, name
        assert c.get(href, params={"fragment": "pipeline"}).status_code == 200, name
    assert c.get("/workflows/definitions/%20billing%2FInvoice%20").status_code == 404


def test_a_bad_window_is_400(db_url, shop):
    c = client(db_url)
    assert c.get("/workflows/definitions?window=2d").status_code == 400
    assert c.get("/workflows/definitions/ShopFlow?window=forever").status_code == 400


def test_a_registered_python_class_has_no_badge(db_url, conn):
    import pgbus

    class InsightsProbe(pgbus.Workflow):
        workflow_name = "tests.InsightsProbe"

        @pgbus.step
        def only(self): ...

    conn.execute(
        "SELECT pgbus.workflow_register('tests.InsightsProbe', '[{\"name\": \"only\"}]',"
        " 'd1', 'insights_probe')"
    )
    r = client(db_url).get("/workflows/definitions")
    row = re.search(r'<tr data-class="tests.InsightsProbe">(.*?)</tr>', r.text, re.S).group(1)
    assert "definition not loaded" not in row


def test_random_class_names_windows_and_fragments_never_fail(db_url, shop):
    from urllib.parse import quote

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    c = client(db_url)

    @settings(
        max_examples=60,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        name=st.one_of(st.sampled_from(["ShopFlow", "GoneFlow", "Nope"]), st.text(max_size=40)),
        query=st.lists(
            st.tuples(
                st.sampled_from(["window", "fragment", "workflow_class"]),
                st.one_of(
                    st.sampled_from(["1h", "24h", "7d", "30d", "pipeline", "charts", "funnel"]),
                    st.text(max_size=20),
                ),
            ),
            max_size=3,
        ),
    )
    def go(name, query):
        for path in (f"/workflows/definitions/{quote(name, safe='')}", "/workflows/definitions"):
            r = c.get(path, params=query)
            assert r.status_code < 500, (path, query, r.status_code, r.text[:300])
            if r.status_code >= 400:
                assert "Traceback" not in r.text

    go()


def test_the_removed_step_links_and_the_attention_count_match_the_pages_they_open(db_url, conn):
    """Legacy (a, b, c, d) is registered again without b and with c as a gravestone while runs
    sit on them: the list counts those runs, each removed step links to the Workflows list of
    the runs on it, and the need-attention count is what the attention page shows for the
    class (another class's stuck run is on neither)."""
    register(conn, "Legacy", [{"name": "a"}, {"name": "b"}, {"name": "c"}, {"name": "d"}])
    runs = [start(conn, "Legacy", ("Order", str(i))) for i in range(6)]

    def ends(verbs: dict[int, str]) -> None:
        taken = {s["workflow_id"]: s["step_id"] for s in take_steps(conn, "Legacy")}
        for i, verb in verbs.items():
            end_step(conn, taken[runs[i]], verb, ERROR if verb == "pause" else None)

    ends({0: "complete", 1: "complete", 2: "complete", 3: "complete", 4: "pause"})  # 5 running at a
    ends({0: "complete", 1: "complete", 2: "pause"})  # 3 running at b
    ends({0: "complete"})  # 1 running at c; 0 ready at d
    conn.execute(
        "SELECT pgbus.workflow_register('Legacy', %s, 'd2', 'legacy', removed_steps => '{c}')",
        (Jsonb([{"name": "a"}, {"name": "c", "removed": True}, {"name": "d"}]),),
    )
    start(conn, "Legacy", ("Order", "new"))  # on the new definition, at a
    register(conn, "Bystander", [{"name": "only"}])  # stuck too, in another class
    start(conn, "Bystander")
    for s in take_steps(conn, "Bystander"):
        end_step(conn, s["step_id"], "pause", ERROR)
    c = client(db_url)
    r = c.get("/workflows/definitions")
    row = re.search(r'<tr data-class="Legacy">(.*?)</tr>', r.text, re.S).group(1)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    removed = re.fullmatch(r"(\d+): (.*)", cells[6].strip(), re.S)
    assert removed, cells[6]
    links = re.findall(r'<a href="([^"]+)">([^<]+)</a>', removed.group(2))
    assert [step for _, step in links] == ["b", "c"]
    on_step = {step: list_count(c, html.unescape(href)) for href, step in links}
    assert on_step == {"b": 2, "c": 1}  # runs 2 and 3 at b, run 1 at c
    assert sum(on_step.values()) == int(removed.group(1)) == 3
    b_list = c.get(html.unescape(links[0][0])).text
    assert set(re.findall(r'href="/workflows/([0-9a-f-]{36})"', b_list)) == {runs[2], runs[3]}
    # Need attention: runs 4 (paused at a) and 2 (paused at b); the attention page of the class
    # shows as many runs in its groups.
    attention_href, shown = re.search(r'<a href="([^"]+)">([\d,]+)</a>', cells[2]).groups()
    groups = c.get(html.unescape(attention_href))
    assert groups.status_code == 200
    body = re.search(r"<tbody>(.*?)</tbody>", groups.text, re.S).group(1)
    in_groups = [
        int(n.replace(",", "")) for n in re.findall(r'<td class="num">([\d,]+)</td>', body)
    ]
    assert sum(in_groups) == int(shown) == 2 and len(in_groups) == 2

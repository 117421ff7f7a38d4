"""The Workflows pages in Chromium: the run timeline renders, zooms and matches its table, the
confirm dialogs of the run's actions, and the signal form's double submit sending one signal.
(The axe gate covers the list, a run, attention and a run's open confirm dialog, in light and
dark mode: test_accessibility.py.)"""

from __future__ import annotations

import re

import psycopg

from tests.py.browser.test_dashboard_browser import assert_centred


def run_of(db_url: str, cls: str, subject_id: str | None = None, status: str | None = None) -> str:
    with psycopg.connect(db_url) as conn:
        return str(
            conn.execute(
                "SELECT workflow_id FROM pgbus.workflows WHERE workflow_class = %s"
                " AND (%s::text IS NULL OR subject_id = %s) AND (%s::text IS NULL OR status = %s)"
                " ORDER BY created_at LIMIT 1",
                (cls, subject_id, subject_id, status, status),
            ).fetchone()[0]
        )


def seconds(text: str) -> float | None:
    """A duration as the table words it ("850 ms", "1.2 s", "3 min", "1.5 h") in seconds."""
    m = re.fullmatch(r"([\d.]+) (ms|s|min|h|d)", text.strip())
    if not m:
        return None
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "min": 60, "h": 3600, "d": 86400}[m.group(2)]


def test_timeline_renders_zooms_and_matches_its_table(dashboard, page):
    run = run_of(dashboard.db_url, "OrderFlow", "done")
    p = page.page
    p.goto(dashboard.url + f"/workflows/{run}")
    p.locator("figure.chart svg.apexcharts-svg").first.wait_for(timeout=5000)
    chart = p.evaluate(
        """() => { const w = ApexCharts.getChartByID('timeline').w;
                   return { series: w.config.series, min: w.globals.minY, max: w.globals.maxY }; }"""
    )
    rows = p.locator("table[aria-describedby='timeline-caption'] tbody tr").evaluate_all(
        "trs => trs.map(tr => [...tr.cells].map(td => td.textContent))"
    )
    # One row per attempt (capture failed, capture again, receipt) and the pause, in the
    # chart and in the table alike.
    labels = {d["x"] for s in chart["series"] for d in s["data"]}
    assert labels == {r[0] for r in rows} == {"capture #1", "capture #2", "receipt #1", "paused"}
    # The ran segments hold the table's "Ran" numbers.
    ran = {
        d["x"]: (d["y"][1] - d["y"][0]) / 1000
        for s in chart["series"]
        if s["name"] == "Ran"
        for d in s["data"]
    }
    for r in rows:
        if r[0] in ran:
            shown = seconds(r[4])
            assert shown is not None and abs(shown - ran[r[0]]) <= max(0.05 * ran[r[0]], 0.001), (
                r,
                ran,
            )
    assert [r[1] for r in rows if r[0] == "capture #1"] == ["failed"]
    # Drag across the plot: the chart zooms into the selection.
    grid = p.locator("figure.chart .apexcharts-grid").first.bounding_box()
    y = grid["y"] + grid["height"] / 2
    p.mouse.move(grid["x"] + grid["width"] * 0.3, y)
    p.mouse.down()
    p.mouse.move(grid["x"] + grid["width"] * 0.5, y, steps=8)
    p.mouse.move(grid["x"] + grid["width"] * 0.7, y, steps=8)
    p.mouse.up()
    # The selection becomes the time axis' bounds: a narrower window inside the first one.
    p.wait_for_function(
        "([a, b]) => { const w = ApexCharts.getChartByID('timeline').w;"
        " const lo = w.config.xaxis.min, hi = w.config.xaxis.max;"
        " return w.globals.zoomed && lo > a && hi < b && hi > lo; }",
        arg=[chart["min"], chart["max"]],
        timeout=5000,
    )
    assert page.errors == []


def test_run_actions_confirm_in_a_centred_dialog(dashboard, page):
    run = run_of(dashboard.db_url, "OrderFlow", status="paused")
    p = page.page
    p.goto(dashboard.url + f"/workflows/{run}")
    form = p.locator("form[action$='/cancel']")
    assert form.get_attribute("data-confirm") == "Cancel this run? It cannot be resumed afterwards."
    form.locator("button[type=submit]").click()
    dialog = p.locator("dialog#pgbus-confirm")
    assert dialog.evaluate("d => d.open && d.matches(':modal')")
    assert_centred(p, "dialog#pgbus-confirm")
    assert p.locator("#pgbus-confirm-ok").inner_text() == "Cancel"
    p.keyboard.press("Escape")
    assert not dialog.evaluate("d => d.open")
    with psycopg.connect(dashboard.db_url) as conn:
        assert (
            conn.execute(
                "SELECT status FROM pgbus.workflows WHERE workflow_id = %s", (run,)
            ).fetchone()[0]
            == "paused"
        )


def signals(db_url: str, run: str) -> list[tuple]:
    with psycopg.connect(db_url) as conn:
        return conn.execute(
            "SELECT name, payload, idempotency_key FROM pgbus.workflow_signals WHERE workflow_id = %s",
            (run,),
        ).fetchall()


def test_signal_form_double_submit_sends_one_signal(dashboard, page):
    run = run_of(dashboard.db_url, "Welcome")
    p = page.page
    p.goto(dashboard.url + f"/workflows/{run}")
    form = p.locator("form[action$='/signal']")
    form.locator("#signal-name").fill("address_checked")
    form.locator("#signal-payload").fill('{"ok": true}')
    key = form.locator("#signal-key").input_value()
    assert len(key) >= 16  # a fresh key per render
    fields = form.evaluate("f => [...new FormData(f).entries()]")
    action = form.evaluate("f => f.action")
    # First press: through the confirm dialog, as an operator does.
    form.locator("button[type=submit]").click()
    with p.expect_navigation():
        p.locator("#pgbus-confirm-ok").click()
    toast = p.locator("#pgbus-toasts output.toast").first
    toast.wait_for(state="visible", timeout=3000)
    assert toast.get_attribute("data-kind") == "ok"
    # The same form again (a second press, a resubmit): same key, same session.
    r = p.request.post(action, form=dict(fields), max_redirects=0)
    assert r.status == 303
    p.goto(dashboard.url + f"/workflows/{run}")
    again = p.locator("#pgbus-toasts output.toast").first
    again.wait_for(state="visible", timeout=3000)
    assert again.inner_text().strip() == "Signal already delivered"
    assert signals(dashboard.db_url, run) == [("address_checked", {"ok": True}, key)]
    # A new render carries a new key: a deliberate second signal is sent.
    assert p.locator("form[action$='/signal'] #signal-key").input_value() != key
    assert page.errors == []

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


def rgb(colour: str) -> tuple[int, int, int]:
    """A CSS colour ("#8c959f", "rgb(1, 2, 3)", "rgba(1,2,3,0.85)") as its red, green, blue."""
    if colour.startswith("#"):
        return tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return tuple(int(v) for v in re.findall(r"\d+", colour)[:3])


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
        if s["name"].startswith("Ran")
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


def test_timeline_rows_follow_the_attempts_and_the_legend_is_the_bars_colours(dashboard, page):
    """A run of two steps within a second, the second after a wait: its rows are in attempt
    order (the first series to name a row, Waited, names only the second), every bar has its
    legend entry's colour, and the time axis reads as clock times to the millisecond."""
    from tests.py.workflow_page_support import end_step, register, start, take_steps

    with psycopg.connect(dashboard.db_url, autocommit=True) as conn:
        register(conn, "Brisk", [{"name": "first"}, {"name": "second"}])
        run = start(conn, "Brisk")
        for _ in range(2):  # first, then second (due as the first ends)
            for s in take_steps(conn, "Brisk"):
                end_step(conn, s["step_id"], "complete")
        # The first step due as it was created (no Waited segment of its own), the second
        # scheduled 200 ms after it was (a wait).
        conn.execute(
            "UPDATE pgbus.workflow_steps"
            " SET scheduled_at = CASE step_name WHEN 'first' THEN created_at ELSE scheduled_at END,"
            "     created_at = CASE step_name WHEN 'first' THEN created_at"
            "                  ELSE scheduled_at - interval '200 milliseconds' END"
            " WHERE workflow_id = %s",
            (run,),
        )
    p = page.page
    p.goto(dashboard.url + f"/workflows/{run}")
    p.locator("figure.chart svg.apexcharts-svg").first.wait_for(timeout=5000)
    chart = p.evaluate(
        """() => { const w = ApexCharts.getChartByID('timeline').w;
                   return { labels: w.globals.labels, names: w.config.series.map(s => s.name),
                            colours: w.globals.colors }; }"""
    )
    rows = p.locator("table[aria-describedby='timeline-caption'] tbody tr").evaluate_all(
        "trs => trs.map(tr => tr.cells[0].textContent)"
    )
    assert chart["labels"] == rows == ["first #1", "second #1"]
    # As drawn: the rows' labels top to bottom, and each bar on its own row's line.
    drawn = p.locator("figure.chart .apexcharts-yaxis-label").evaluate_all(
        "els => els.map(e => [e.querySelector('tspan').textContent,"
        " e.getBoundingClientRect().y + e.getBoundingClientRect().height / 2])"
    )
    assert [name for name, _ in sorted(drawn, key=lambda d: d[1])] == rows
    row_y = dict(drawn)
    spans = p.evaluate(
        """() => { const w = ApexCharts.getChartByID('timeline').w;
                   return [...document.querySelectorAll('figure.chart .apexcharts-rangebar-area')]
                     .map(e => { const r = e.getBoundingClientRect();
                                 const s = +e.getAttribute('index'), j = +e.getAttribute('j');
                                 return [w.config.series[s].data[j].x, r.y + r.height / 2]; }); }"""
    )
    for label, y in spans:
        nearest = min(row_y, key=lambda name: abs(row_y[name] - y))
        assert nearest == label, (label, y, row_y)
    assert chart["names"][0] == "Waited"
    # The legend's markers and the bars: one colour per series, the same.
    legend = p.locator("figure.chart .apexcharts-legend-series").evaluate_all(
        "els => els.map(e => [e.querySelector('.apexcharts-legend-text').textContent,"
        " e.querySelector('path').getAttribute('fill')])"
    )
    bars = p.locator("figure.chart .apexcharts-rangebar-area").evaluate_all(
        "els => els.map(e => [+e.getAttribute('index'), e.getAttribute('fill')])"
    )
    assert {i for i, _ in bars} == set(range(len(chart["names"])))
    for i, fill in bars:
        assert rgb(fill) == rgb(chart["colours"][i]), (chart["names"][i], fill)
    assert [(name, rgb(colour)) for name, colour in legend] == [
        (name, rgb(colour)) for name, colour in zip(chart["names"], chart["colours"], strict=True)
    ]
    labels = p.locator("figure.chart .apexcharts-xaxis-label tspan").evaluate_all(
        "els => els.map(e => e.textContent)"
    )
    assert labels and all(re.fullmatch(r"\d\d:\d\d:\d\d\.\d{3}", t.strip()) for t in labels), labels
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

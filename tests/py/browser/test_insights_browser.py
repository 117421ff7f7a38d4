"""The workflow insights pages in Chromium: both charts draw beside their tables, a count links
to the Workflows list of exactly those runs, the window switch keeps the class, no console
error, in light and dark mode. (The axe gate covers both pages through pages.page_paths.)"""

from __future__ import annotations

import re

import pytest

CLASS_PAGE = "/workflows/definitions/app.workflows.OrderFlow"


@pytest.mark.parametrize("theme", ("light", "dark"))
def test_the_class_page_draws_its_charts_beside_their_tables(dashboard, browser, theme):
    from tests.py.browser.conftest import watch

    ctx = browser.new_context(color_scheme=theme, viewport={"width": 1280, "height": 900})
    try:
        w = watch(ctx.new_page())
        p = w.page
        p.goto(dashboard.url + CLASS_PAGE + "?window=7d")
        holders = p.locator("figure.chart [data-chart]")
        assert holders.count() == 2
        for i in range(2):
            holders.nth(i).locator("svg.apexcharts-svg").wait_for(timeout=5000)
            assert p.locator("figure.chart figcaption").nth(i).inner_text().strip()
        assert p.locator(".chart-block table").count() == 2
        assert (
            p.locator("table.pipeline tbody tr").count() == 4
        )  # charge, pack (removed), ship, notify
        assert "removed" in p.locator("table.pipeline tr[data-step='pack']").inner_text()
        assert w.errors == []
    finally:
        ctx.close()


def test_a_count_opens_the_list_of_exactly_those_runs(dashboard, page):
    p = page.page
    p.goto(dashboard.url + "/workflows/definitions?window=7d")
    row = p.locator("tr[data-class='app.workflows.OrderFlow']")
    link = row.locator("a[data-count]").nth(2)  # finished in the window (ongoing, paused, finished)
    n = int(link.get_attribute("data-count"))
    assert n > 25
    link.click()
    p.wait_for_load_state("load")
    assert re.search(rf"\b{n:,} matching runs", p.locator("main").inner_text())
    assert "status=finished" in p.url and "ended_from=" in p.url
    assert page.errors == []


def test_the_window_switch_keeps_the_class(dashboard, page):
    p = page.page
    p.goto(dashboard.url + CLASS_PAGE)
    p.get_by_role("link", name="30d").click()
    p.wait_for_load_state("load")
    assert p.url.endswith(CLASS_PAGE + "?window=30d")
    assert p.locator("nav.periods a[aria-current='page']").inner_text() == "30d"
    assert page.errors == []

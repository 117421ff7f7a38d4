"""The dashboard in a real browser: dialogs, auto-refresh and its pauses, toasts, dark mode,
charts, and that no page asks anything of another origin."""

from __future__ import annotations

import time

import psycopg
import pytest

from tests.py.browser.conftest import REFRESH_MS, same_origin, watch
from tests.py.browser.pages import page_paths
from tests.py.browser.seed import enqueue

# Headless Chromium never hides a page, so the tests drive the two signals a browser gives when
# a tab goes to the background (document.hidden / visibilityState and the visibilitychange
# event) through this init script, which runs before the page's own scripts.
VISIBILITY_SWITCH = """
(() => {
  let hidden = false;
  Object.defineProperty(Document.prototype, "hidden", { configurable: true, get: () => hidden });
  Object.defineProperty(Document.prototype, "visibilityState", {
    configurable: true, get: () => (hidden ? "hidden" : "visible") });
  window.__setHidden = (h) => { hidden = h; document.dispatchEvent(new Event("visibilitychange")); };
})();
"""

# The WCAG contrast ratio of an element's text against the first opaque background behind it.
CONTRAST = """
(el) => {
  const parse = (c) => {
    const m = (c.match(/[\\d.]+/g) || []).map(Number);
    if (m.length < 3) throw new Error("unparsed colour " + c + " on " + el.outerHTML.slice(0, 120));
    return m.length > 3 ? m : [...m, 1];
  };
  const lum = ([r, g, b]) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  let bg = null;
  for (let n = el; n; n = n.parentElement) {
    const c = parse(getComputedStyle(n).backgroundColor);
    if (c[3] >= 0.99) { bg = c; break; }
  }
  if (!bg) bg = [255, 255, 255, 1];
  const fg = parse(getComputedStyle(el).color);
  const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
  return (a + 0.05) / (b + 0.05);
}
"""


def fragment_requests(w, since: int = 0, region: str | None = None) -> list[str]:
    hits = [u for u in w.requests[since:] if "fragment=" in u]
    if region is not None:
        hits = [u for u in hits if f"fragment={region}" in u]
    return hits


def settle(page, intervals: float = 3) -> None:
    page.wait_for_timeout(int(REFRESH_MS * intervals))


def wait_for_refreshes(w, since: int, n: int = 1, region: str | None = None) -> None:
    """Until `n` fragment requests (of `region`) were made since `since`: the page's events are
    taken in while it waits, for at most 30 refresh intervals (a loaded machine is slow)."""
    deadline = time.monotonic() + REFRESH_MS * 30 / 1000
    while len(fragment_requests(w, since, region)) < n:
        assert time.monotonic() < deadline, f"fewer than {n} refreshes of {region or 'any region'}"
        w.page.wait_for_timeout(50)


def wait_refresh_idle(page, region_id: str) -> None:
    """Until no refresh of the region is in flight (the page marks one with aria-busy)."""
    page.wait_for_function(
        "id => !document.getElementById(id).hasAttribute('aria-busy')",
        arg=region_id,
        timeout=REFRESH_MS * 30,
    )


@pytest.fixture
def queue_with_messages(dashboard):
    """A queue of this test's own with five messages (actions on it touch nothing else)."""

    def make(name: str) -> str:
        with psycopg.connect(dashboard.db_url, autocommit=True) as conn:
            conn.execute("SELECT pgbus.ensure_queue(%s)", (name,))
            enqueue(conn, name, "app.jobs:Noop", [{"n": i} for i in range(5)])
        return name

    return make


def queue_depth(db_url: str, queue: str) -> int:
    with psycopg.connect(db_url) as conn:
        return conn.execute(f"SELECT count(*) FROM pgmq.q_{queue}").fetchone()[0]


# -- every page ------------------------------------------------------------------------------


def test_every_page_loads_from_its_own_origin_only(dashboard, page):
    """Every request of every page (assets, fragments, chart styles) goes to the app's origin,
    and no page logs an error (a CSP refusal shows up as one)."""
    pages = page_paths(dashboard.db_url)
    for name, path in pages.items():
        start = len(page.requests)
        response = page.page.goto(dashboard.url + path)
        assert response is not None and response.status == 200, (name, path)
        settle(page.page, 2.5)  # let a few refreshes run too
        asked = page.requests[start:]
        assert asked, name
        foreign = [u for u in asked if not same_origin(u, dashboard.url)]
        assert foreign == [], (name, foreign)
    assert page.errors == []


def test_the_layout_loads_the_assets_and_the_partial(dashboard, page):
    page.page.goto(dashboard.url + "/")
    p = page.page
    assert p.evaluate("typeof htmx") == "object"
    assert p.evaluate("htmx.version").startswith("2.0.")
    assert p.evaluate("htmx.config.allowEval") is False
    assert p.evaluate("htmx.config.includeIndicatorStyles") is False
    assert p.locator("dialog#pgbus-confirm").count() == 1
    assert p.locator("dialog#pgbus-alert").count() == 1
    assert p.locator("#pgbus-toasts[aria-live=polite]").count() == 1
    # htmx injects no <style>: nothing inline anywhere.
    assert p.locator("style").count() == 0
    assert any(u.endswith("/static/pgbus.css") for u in page.requests)


def test_the_policy_forbids_inline_script_and_eval(dashboard, page):
    response = page.page.goto(dashboard.url + "/insights")
    policy = response.headers["content-security-policy"]
    directives = {d.split()[0]: d.split()[1:] for d in policy.split(";") if d.strip()}
    script = directives.get("script-src", directives.get("default-src"))
    assert "'self'" in script
    assert "'unsafe-inline'" not in script and "'unsafe-eval'" not in script
    # The charts render under that policy with nothing refused (a refusal logs an error).
    page.page.locator("svg.apexcharts-svg").first.wait_for(timeout=5000)
    page.page.wait_for_timeout(300)
    assert page.errors == []


# -- confirm dialog (#529) -------------------------------------------------------------------


def assert_centred(p, selector: str) -> None:
    box = p.locator(selector).bounding_box()
    vw, vh = p.viewport_size["width"], p.viewport_size["height"]
    assert box is not None
    assert abs(box["x"] - (vw - box["width"]) / 2) <= 2, (box, vw)
    assert abs(box["y"] - (vh - box["height"]) / 2) <= 2, (box, vh)
    assert box["x"] > 0 and box["y"] > 0


def purge_form(p):
    return p.locator("form[data-confirm][action$='/purge']").first


def test_confirm_dialog_opens_centred_and_escape_cancels(dashboard, page, queue_with_messages):
    q = queue_with_messages("confirm_escape")
    p = page.page
    for width, height in ((1280, 900), (390, 700), (1920, 1080)):
        p.set_viewport_size({"width": width, "height": height})
        p.goto(dashboard.url + f"/queues/{q}")
        form = purge_form(p)
        form.locator("button[type=submit], button:not([type])").first.click()
        dialog = p.locator("dialog#pgbus-confirm")
        assert dialog.evaluate("d => d.open && d.matches(':modal')")
        assert_centred(p, "dialog#pgbus-confirm")
        # The form's own sentence and label; focus starts on Cancel (the safe choice).
        assert p.locator("#pgbus-confirm-message").inner_text() == form.get_attribute(
            "data-confirm"
        )
        label = form.get_attribute("data-confirm-label")
        if label:
            assert p.locator("#pgbus-confirm-ok").inner_text() == label
        assert p.evaluate("document.activeElement.id") == "pgbus-confirm-cancel"
        p.keyboard.press("Escape")
        assert not dialog.evaluate("d => d.open")
        assert p.url.endswith(f"/queues/{q}")
    assert queue_depth(dashboard.db_url, q) == 5  # nothing happened


def test_confirm_dialog_confirms_by_keyboard(dashboard, page, queue_with_messages):
    q = queue_with_messages("confirm_keys")
    p = page.page
    p.goto(dashboard.url + f"/queues/{q}")
    button = purge_form(p).locator("button[type=submit], button:not([type])").first
    button.focus()
    p.keyboard.press("Enter")
    assert p.locator("dialog#pgbus-confirm").evaluate("d => d.open")
    # Cancel by keyboard first: Enter on the focused Cancel button.
    p.keyboard.press("Enter")
    assert not p.locator("dialog#pgbus-confirm").evaluate("d => d.open")
    assert p.evaluate("document.activeElement") is not None
    assert queue_depth(dashboard.db_url, q) == 5
    # Open again, Tab to Confirm, Enter: the form is submitted once.
    button.focus()
    p.keyboard.press("Enter")
    p.keyboard.press("Tab")
    assert p.evaluate("document.activeElement.id") == "pgbus-confirm-ok"
    with p.expect_navigation():
        p.keyboard.press("Enter")
    assert queue_depth(dashboard.db_url, q) == 0
    toast = p.locator("#pgbus-toasts .toast")
    toast.first.wait_for(state="visible", timeout=3000)


def test_confirm_buttons_keep_contrast_in_light_and_dark(dashboard, context, queue_with_messages):
    q = queue_with_messages("confirm_contrast")
    w = watch(context.new_page())
    p = w.page
    for theme in ("light", "dark"):
        p.goto(dashboard.url + f"/queues/{q}")
        p.evaluate("t => { localStorage.setItem('pgbus-theme', t) }", theme)
        p.reload()
        assert p.evaluate("document.documentElement.dataset.theme") == theme
        # Every visible button on the page, then the dialog's buttons (plain and danger forms).
        # In one evaluation: a refresh may swap a region's buttons between two calls.
        ratios = p.evaluate(
            f"() => [...document.querySelectorAll('button')]"
            f".filter(b => b.checkVisibility())"
            f".map(b => [b.textContent.trim(), ({CONTRAST})(b)])"
        )
        assert ratios
        low = [(label, r) for label, r in ratios if r < 4.5]
        assert low == [], (theme, low)
        for danger in (False, True):
            p.evaluate("d => window.pgbus.confirm('Really?', 'Do it', d, () => {})", danger)
            for button in p.locator("dialog#pgbus-confirm button").all():
                ratio = button.evaluate(CONTRAST)
                assert ratio >= 4.5, (theme, danger, button.inner_text(), ratio)
            p.keyboard.press("Escape")


def test_forms_without_javascript_submit_directly(dashboard, browser, queue_with_messages):
    q = queue_with_messages("no_js")
    ctx = browser.new_context(java_script_enabled=False)
    try:
        p = ctx.new_page()
        p.goto(dashboard.url + f"/queues/{q}")
        with p.expect_navigation():
            purge_form(p).locator("button[type=submit], button:not([type])").first.click()
        assert queue_depth(dashboard.db_url, q) == 0
    finally:
        ctx.close()


def test_bulk_form_with_nothing_selected_opens_the_alert(dashboard, page):
    p = page.page
    p.goto(dashboard.url + "/jobs?status=failed")
    form = p.locator("form[data-bulk-form], form.bulk-actions").first
    form.wait_for(state="attached")
    form_id = form.get_attribute("id")
    submit = p.locator(f"form#{form_id} button, button[form='{form_id}']").first
    url = p.url
    submit.click()
    alert = p.locator("dialog#pgbus-alert")
    assert alert.evaluate("d => d.open && d.matches(':modal')")
    assert_centred(p, "dialog#pgbus-alert")
    assert "Select" in p.locator("#pgbus-alert-message").inner_text()
    p.keyboard.press("Escape")
    assert not alert.evaluate("d => d.open")
    assert p.url == url


# -- auto-refresh ----------------------------------------------------------------------------


def test_regions_refresh_by_fragment_and_pause_while_hidden(dashboard, context):
    context.add_init_script(VISIBILITY_SWITCH)
    w = watch(context.new_page())
    p = w.page
    p.goto(dashboard.url + "/")
    regions = p.locator("section[data-refresh]")
    assert regions.count() >= 1
    wait_for_refreshes(w, 0, 2)

    p.evaluate("window.__setHidden(true)")
    for region in regions.evaluate_all("ss => ss.map(s => s.id)"):
        wait_refresh_idle(p, region)  # a request already under way may finish
    mark = len(w.requests)
    settle(p, 4)  # (nothing may happen: four intervals pass with no refresh)
    assert fragment_requests(w, mark) == []

    mark = len(w.requests)
    p.evaluate("window.__setHidden(false)")
    wait_for_refreshes(w, mark, 2)
    assert w.errors == []


def test_refresh_swaps_in_new_data(dashboard, page, queue_with_messages):
    p = page.page
    p.goto(dashboard.url + "/queues")
    q = "appears_later"
    assert p.locator(f"text={q}").count() == 0
    queue_with_messages(q)
    p.locator(f"section[data-refresh] >> text={q}").first.wait_for(timeout=REFRESH_MS * 12)


def test_refresh_pauses_while_a_bulk_box_is_checked(dashboard, page):
    p = page.page
    w = page
    p.goto(dashboard.url + "/jobs?status=failed")
    box = p.locator("input[data-bulk]").first
    box.wait_for(state="visible")
    wait_for_refreshes(w, 0)
    box.check()
    # (A refresh already in flight when the box was checked is dropped, not swapped in.)
    for region in ("failed", "enqueued"):
        wait_refresh_idle(p, region)
    mark = len(w.requests)
    settle(p, 4)  # (nothing may happen: four intervals pass with no refresh)
    assert fragment_requests(w, mark) == []
    assert box.is_checked()  # the selection survived
    box.uncheck()
    wait_for_refreshes(w, len(w.requests))


def test_refresh_skips_a_region_whose_details_are_open(dashboard, page):
    p = page.page
    w = page
    p.goto(dashboard.url + "/")
    regions = p.locator("section[data-refresh]")
    assert regions.count() >= 2, "the home page has several live regions"
    # The home page's health region has its own <details> (the queue tables); any other
    # region gets one added for the test.
    with_details = p.locator("section[data-refresh]:has(details)")
    if with_details.count():
        first = with_details.first
    else:
        first = regions.nth(0)
        first.evaluate(
            "s => s.insertAdjacentHTML('beforeend', '<details><summary>More</summary><p>x</p></details>')"
        )
    region_id = first.get_attribute("id")
    other_id = next(i for i in regions.evaluate_all("ss => ss.map(s => s.id)") if i != region_id)
    first.locator("details > summary").first.click()
    assert first.locator("details[open]").count() == 1
    # (A refresh of the region already in flight when it opened is dropped, not swapped in.)
    wait_refresh_idle(p, region_id)
    mark = len(w.requests)
    wait_for_refreshes(w, mark, 2, other_id)  # two more rounds: the other regions go on
    assert fragment_requests(w, mark, region_id) == []
    assert first.locator("details[open]").count() == 1
    first.locator("details > summary").first.click()
    wait_for_refreshes(w, len(w.requests), 1, region_id)


def test_a_refresh_in_flight_when_details_open_leaves_them_open(dashboard, page):
    """A region's refresh is on its way when the user opens a <details> in it: its answer is
    not swapped in (that would close what was just opened)."""
    p = page.page
    w = page
    held = []

    def health(url: str) -> bool:
        return "fragment=health" in url

    p.route(health, lambda route: held.append(route))
    p.goto(dashboard.url + "/")
    region = p.locator("section#health")
    deadline = time.monotonic() + REFRESH_MS * 30 / 1000
    while not held:  # a refresh of the region is on its way (held here)
        assert time.monotonic() < deadline, "no refresh of the health region"
        p.wait_for_timeout(50)
    region.locator("details > summary").first.click()
    assert region.locator("details[open]").count() == 1
    held[0].continue_()
    p.unroute(health)
    wait_refresh_idle(p, "health")
    assert region.locator("details[open]").count() == 1
    assert w.errors == []


def test_refresh_pauses_while_the_confirm_dialog_is_open(dashboard, page, queue_with_messages):
    q = queue_with_messages("dialog_pause")
    p = page.page
    w = page
    p.goto(dashboard.url + f"/queues/{q}")
    purge_form(p).locator("button[type=submit], button:not([type])").first.click()
    p.locator("dialog#pgbus-confirm[open]").wait_for()
    for region in p.locator("section[data-refresh]").evaluate_all("ss => ss.map(s => s.id)"):
        wait_refresh_idle(p, region)
    mark = len(w.requests)
    settle(p, 4)  # (nothing may happen: four intervals pass with no refresh)
    assert fragment_requests(w, mark) == []
    p.keyboard.press("Escape")
    wait_for_refreshes(w, len(w.requests))


# -- toasts ----------------------------------------------------------------------------------


def test_flash_becomes_a_toast_that_goes_after_five_seconds(dashboard, page, queue_with_messages):
    q = queue_with_messages("toast_pause")
    p = page.page
    p.goto(dashboard.url + f"/queues/{q}")
    form = p.locator("form[action$='/pause']").first
    with p.expect_navigation():
        form.locator("button").first.click()
        if p.locator("dialog#pgbus-confirm[open]").count():
            p.locator("#pgbus-confirm-ok").click()
    toast = p.locator("#pgbus-toasts output.toast").first
    toast.wait_for(state="visible", timeout=2000)
    shown = time.monotonic()
    assert toast.inner_text().strip()
    assert toast.get_attribute("data-kind") in ("ok", "refused", "error")
    toast.wait_for(state="detached", timeout=10000)
    gone = time.monotonic() - shown
    assert 4.5 <= gone <= 8.0, gone


# -- dark mode -------------------------------------------------------------------------------


def background(p) -> str:
    return p.evaluate("getComputedStyle(document.body).backgroundColor")


def test_dark_mode_toggle_is_remembered(dashboard, browser):
    ctx = browser.new_context(color_scheme="light")
    try:
        p = ctx.new_page()
        p.goto(dashboard.url + "/")
        light = background(p)
        toggle = p.locator("#theme-toggle")
        assert toggle.get_attribute("aria-pressed") == "false"
        toggle.click()
        assert p.evaluate("document.documentElement.dataset.theme") == "dark"
        assert toggle.get_attribute("aria-pressed") == "true"
        dark = background(p)
        assert dark != light
        assert p.evaluate("localStorage.getItem('pgbus-theme')") == "dark"
        p.goto(dashboard.url + "/queues")  # another page
        assert p.evaluate("document.documentElement.dataset.theme") == "dark"
        assert background(p) == dark
        p.reload()
        assert background(p) == dark
        p.locator("#theme-toggle").click()
        assert background(p) == light
        assert p.evaluate("localStorage.getItem('pgbus-theme')") == "light"
    finally:
        ctx.close()


def test_dark_mode_follows_the_system_until_chosen(dashboard, browser):
    ctx = browser.new_context(color_scheme="dark")
    try:
        p = ctx.new_page()
        p.goto(dashboard.url + "/")
        dark = background(p)
        assert p.locator("#theme-toggle").get_attribute("aria-pressed") == "true"
        p.locator("#theme-toggle").click()  # choose light on a dark system
        assert background(p) != dark
        p.reload()
        assert background(p) != dark
    finally:
        ctx.close()


# -- charts ----------------------------------------------------------------------------------


def test_charts_render_with_a_table_beside_them(dashboard, page):
    p = page.page
    p.goto(dashboard.url + "/insights")
    holders = p.locator("figure.chart [data-chart]")
    n = holders.count()
    assert n >= 1
    for i in range(n):
        holder = holders.nth(i)
        holder.locator("svg.apexcharts-svg").wait_for(timeout=5000)
        assert holder.locator("svg.apexcharts-svg path, svg.apexcharts-svg rect").count() > 0
        figure = p.locator("figure.chart").nth(i)
        assert figure.locator("figcaption").inner_text().strip()
    assert p.locator("table").count() >= n
    # Charts follow the theme.
    p.locator("#theme-toggle").click()
    p.wait_for_timeout(300)
    assert page.errors == []


def test_every_destructive_button_asks_first(dashboard, page):
    """Purge, delete and discard (one or many) never post without the confirm dialog."""
    p = page.page
    seen = 0
    for path in page_paths(dashboard.db_url).values():
        p.goto(dashboard.url + path)
        unconfirmed = p.evaluate(
            """() => [...document.querySelectorAll("form[method=post] button, form[method=post] input[type=submit]")]
              .map(b => [b, b.getAttribute("formaction") || b.form.getAttribute("action") || ""])
              .filter(([b, action]) => /\\/(purge|delete|discard[^/]*)$/.test(action))
              .map(([b, action]) => [action, b.hasAttribute("data-confirm") || b.form.hasAttribute("data-confirm")])"""
        )
        seen += len(unconfirmed)
        assert [a for a, ok in unconfirmed if not ok] == [], path
    assert seen > 0

"""The accessibility gate: axe-core 4.14.1 on every page, in light and dark mode, and with the
confirm dialog open; zero violations of WCAG 2.0/2.1/2.2 A and AA.

The page's CSP forbids inline scripts, so the context bypasses CSP to let the test inject axe;
the behaviour tests check the same pages under the real CSP.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.py.browser.conftest import AXE, ROOT
from tests.py.browser.pages import page_paths

TAGS = ["wcag2a", "wcag2aa", "wcag21aa", "wcag22aa"]
THEMES = ("light", "dark")


def run_axe(p) -> list[dict]:
    if not p.evaluate("typeof window.axe === 'object'"):
        p.add_script_tag(path=str(AXE))
    result = p.evaluate(
        "tags => axe.run(document, { runOnly: { type: 'tag', values: tags }, resultTypes: ['violations'] })",
        TAGS,
    )
    return result["violations"]


def describe(violations: list[dict]) -> str:
    lines = []
    for v in violations:
        lines.append(f"{v['id']} ({v['impact']}): {v['help']}")
        for node in v["nodes"][:5]:
            lines.append(
                f"    {node['target']}: {node.get('failureSummary', '').splitlines()[-1:]}"
            )
    return "\n".join(lines)


@pytest.fixture(scope="module")
def themed_pages(browser):
    """One page per theme, each in a context that lets the test inject axe."""
    contexts, pages = [], {}
    for theme in THEMES:
        ctx = browser.new_context(
            bypass_csp=True, color_scheme=theme, viewport={"width": 1280, "height": 900}
        )
        ctx.add_init_script(
            f"try {{ localStorage.setItem('pgbus-theme', '{theme}') }} catch (e) {{}}"
        )
        contexts.append(ctx)
        pages[theme] = ctx.new_page()
    yield pages
    for ctx in contexts:
        ctx.close()


@pytest.mark.parametrize("theme", THEMES)
def test_every_page_has_no_axe_violations(dashboard, themed_pages, theme):
    p = themed_pages[theme]
    failures = {}
    for name, path in page_paths(dashboard.db_url).items():
        p.goto(dashboard.url + path)
        p.wait_for_load_state("load")
        assert p.evaluate("document.documentElement.dataset.theme") == theme
        if p.locator("[data-chart]").count():
            p.locator("svg.apexcharts-svg").first.wait_for(timeout=5000)
        violations = run_axe(p)
        if violations:
            failures[name] = describe(violations)
    assert failures == {}, "\n".join(f"{k} ({theme}):\n{v}" for k, v in failures.items())


@pytest.mark.parametrize("theme", THEMES)
def test_open_confirm_dialog_has_no_axe_violations(dashboard, themed_pages, theme):
    p = themed_pages[theme]
    p.goto(dashboard.url + "/queues/default")
    form = p.locator("form[data-confirm]").first
    form.locator("button").first.click()
    assert p.locator("dialog#pgbus-confirm").evaluate("d => d.open")
    violations = run_axe(p)
    p.keyboard.press("Escape")
    assert violations == [], describe(violations)
    # The danger variant too.
    p.evaluate("() => window.pgbus.confirm('Drop queue default?', 'Drop', true, () => {})")
    violations = run_axe(p)
    p.keyboard.press("Escape")
    assert violations == [], describe(violations)


@pytest.mark.parametrize("theme", THEMES)
def test_workflow_run_with_an_open_confirm_dialog_has_no_axe_violations(
    dashboard, themed_pages, theme
):
    p = themed_pages[theme]
    p.goto(dashboard.url + page_paths(dashboard.db_url)["workflow run (paused)"])
    for verb in ("resume", "cancel"):  # a plain and a danger confirm
        p.locator(f"form[action$='/{verb}'] button[type=submit]").click()
        assert p.locator("dialog#pgbus-confirm").evaluate("d => d.open")
        violations = run_axe(p)
        p.keyboard.press("Escape")
        assert violations == [], f"{verb}: " + describe(violations)


def test_home_page_screenshot_for_the_readme(dashboard, browser):
    """Writes docs/dashboard.png when PGBUS_SCREENSHOT=1 (the README's picture)."""
    ctx = browser.new_context(color_scheme="light", viewport={"width": 1280, "height": 860})
    try:
        p = ctx.new_page()
        p.goto(dashboard.url + "/")
        p.wait_for_load_state("load")
        image = p.screenshot(full_page=False)
        assert image[:8] == b"\x89PNG\r\n\x1a\n"
        if os.environ.get("PGBUS_SCREENSHOT") == "1":
            out = Path(ROOT) / "docs" / "dashboard.png"
            out.parent.mkdir(exist_ok=True)
            out.write_bytes(image)
    finally:
        ctx.close()


def test_axe_is_the_pinned_version():
    head = AXE.read_text()[:200]
    assert "axe v4.14.1" in head, head


def test_the_gate_catches_a_violation(dashboard, themed_pages):
    """The gate is not blind: grey-on-white text and an unlabelled button on a real page fail."""
    p = themed_pages["light"]
    p.goto(dashboard.url + "/")
    p.evaluate(
        """() => {
          const main = document.querySelector("main");
          const bad = document.createElement("p");
          bad.textContent = "hard to read";
          bad.style.color = "#bbbbbb";
          bad.style.background = "#ffffff";
          main.prepend(bad);
          main.prepend(document.createElement("button"));
        }"""
    )
    ids = {v["id"] for v in run_axe(p)}
    assert {"color-contrast", "button-name"} <= ids, ids

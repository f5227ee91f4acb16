"""The HTML report in a real headless browser: Debian's chromium, driven by Playwright.

Reports of real A1 runs (burn and PyTorch, 3 steps): one that passes, one with a porting bug built in.
The page must show the verdict, the table and every plot. The screenshots are kept in the test's
directory, or in $BURNSIDE_SCREENSHOTS when set (that is how docs/img/report-a1-*.png are made:
`BURNSIDE_SCREENSHOTS=docs/img python -m pytest tests/report/test_browser.py`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.core.conftest import run_cli

CHROMIUM = os.environ.get("BURNSIDE_CHROMIUM", "/usr/bin/chromium")
#: As the machine's notes prescribe for a closed network and a root user: no sandbox (root), and none of
#: chromium's background connections, which the network refuses.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]

CASES = {
    "ok": ["--optim", "adam"],
    "bug": ["--optim", "adam", "--bug", "epsilon"],
}


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"no chromium at {CHROMIUM}: install Debian's package (apt-get install chromium), as .ci/run "
                    "does, or point BURNSIDE_CHROMIUM at a Chromium binary")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


@pytest.mark.parametrize("case", sorted(CASES))
def test_report_renders_in_chromium(browser, tmp_path: Path, case: str) -> None:
    page_path = tmp_path / f"report-a1-{case}.html"
    proc = run_cli("run", "a1", "--steps", "3", *CASES[case], "--report", str(page_path), "--json", cwd=tmp_path)
    assert proc.returncode == (0 if case == "ok" else 1), proc.stderr
    result = json.loads(proc.stdout)

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(page_path.resolve().as_uri(), wait_until="load")

    verdict = page.locator("#verdict .word")
    assert verdict.is_visible()
    assert verdict.inner_text() == ("OK" if result["passed"] else "FAIL")
    color = verdict.evaluate("e => getComputedStyle(e).color")
    assert color == ("rgb(22, 128, 60)" if result["passed"] else "rgb(192, 38, 45)"), color  # the stylesheet applied

    # The table: one row per compared tensor, each step's group present.
    rows = page.locator("#tensors tr td.name")
    assert rows.count() == len(result["tensors"])
    assert page.locator("#tensors details.step").count() == 3
    first_row = page.locator("#tensors tr td.name").first
    first_row.scroll_into_view_if_needed()
    assert first_row.is_visible() and first_row.inner_text() == result["tensors"][0]["name"]

    # Every plot decoded and laid out at a real size.
    images = page.locator("figure img")
    assert images.count() >= 4
    for i in range(images.count()):
        image = images.nth(i)
        image.scroll_into_view_if_needed()
        decoded = image.evaluate("i => i.complete && i.naturalWidth > 300 && i.naturalHeight > 200")
        box = image.bounding_box()
        assert decoded and box is not None and box["width"] > 300, image.get_attribute("alt")
    assert page.locator("#plot-reference img").count() == 1  # run records the float64 reference

    if case == "bug":
        diagnosis = page.locator(".diagnosis").first
        assert diagnosis.is_visible() and result["diagnosis"][0]["rule"] in diagnosis.inner_text()
        # The first divergence link jumps to its highlighted row.
        page.locator('a[href="#first-divergence"]').click()
        target = page.locator("#first-divergence")
        assert target.is_visible() and target.evaluate("e => e.getBoundingClientRect().top") < 900

    assert all(url.startswith(("file:", "data:")) for url in requests), requests  # nothing from the network

    shots = Path(os.environ.get("BURNSIDE_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    shot = shots / f"report-a1-{case}.png"
    page.goto(page_path.resolve().as_uri(), wait_until="load")
    page.screenshot(path=str(shot), full_page=False)
    assert shot.stat().st_size > 20_000  # a rendered page, not a blank one
    page.close()

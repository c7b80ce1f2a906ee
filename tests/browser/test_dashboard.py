"""The dashboard in a real headless browser (Debian's chromium, driven by selenium through Debian's
chromedriver): it loads without console errors, draws the rails x groups map with the faulted
cells, lists the firing alerts the fault scenario raised, fits a laptop screen without scrolling,
and leaves a screenshot in ``test-artifacts/dashboard.png``.

Skipped where chromium, chromedriver or selenium are missing (``make setup`` installs them).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api.app import create_app
from store.pgserver import EmbeddedStore
from tests.support.api_lab import CONFIG, DOWN_LEAF, FABRIC, STORM_LEAF, seeded_database, serve_in_thread

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1366,768",  # a common laptop screen
)
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

pytestmark = pytest.mark.skipif(
    not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()), reason="chromium and chromedriver are not installed"
)


@pytest.fixture(scope="module")
def base_url(pg_store: EmbeddedStore) -> Iterator[str]:
    with (
        seeded_database(pg_store) as seeded,
        serve_in_thread(lambda: create_app(CONFIG, FABRIC, dsn=seeded.dsn)) as url,
    ):
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    options = Options()
    options.binary_location = CHROMIUM
    for arg in ARGS:
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def test_dashboard_shows_the_fabric_and_the_firing_alerts(browser: Any, base_url: str) -> None:
    browser.get(f"{base_url}/?refresh=2")
    wait = WebDriverWait(browser, 20)
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#alerts tr[data-severity]"))
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#heatmap .cell"))

    cells = browser.find_elements(By.CSS_SELECTOR, "#heatmap .cell")
    assert len(cells) == 8 * 4  # rails x groups
    status = {
        (c.get_attribute("data-rail"), c.get_attribute("data-group")): c.get_attribute("data-status") for c in cells
    }
    assert status[("3", "2")] == "critical"  # the leaf whose uplink is down
    assert status[("5", "3")] == "critical"  # the PFC storm
    assert status[("1", "1")] == "healthy"
    assert browser.find_element(By.ID, "overall").get_attribute("data-status") == "critical"

    rows = browser.find_elements(By.CSS_SELECTOR, "#alerts tr[data-severity]")
    text = "\n".join(r.text for r in rows)
    assert DOWN_LEAF in text and STORM_LEAF in text and "GPUs" in text
    assert any(r.get_attribute("data-severity") == "critical" for r in rows)
    assert DOWN_LEAF in browser.find_element(By.ID, "over").text
    assert "link availability" in browser.find_element(By.ID, "slo").text

    # The summary fits a 1366x768 screen: nothing to scroll.
    doc_h, view_h = browser.execute_script("return [document.documentElement.scrollHeight, window.innerHeight]")
    assert doc_h <= view_h

    ARTIFACTS.mkdir(exist_ok=True)
    assert browser.save_screenshot(str(ARTIFACTS / "dashboard.png"))

    # Survives a refresh cycle, then: no console errors at all.
    browser.execute_script("return refresh()")
    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert errors == []

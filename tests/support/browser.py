"""Driving the dashboard in Debian's headless chromium through selenium (tests/browser/): the
driver, loading a view and waiting for the page's own "rendered" mark, console errors, screenshots
into ``test-artifacts/``, and reading the API beside the browser."""

from __future__ import annotations

import json
import shutil
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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


def have_browser() -> bool:
    return Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless chromium keeping its console log, quit afterwards."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

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


def api(base_url: str, path: str, token: str | None = None) -> Any:
    request = urllib.request.Request(base_url + path, headers={"Authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(request, timeout=30) as resp:
        return json.load(resp)


def console_errors(browser: Any) -> list[dict[str, Any]]:
    return [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def open_view(browser: Any, url: str, view: str, within_s: float = 30) -> float:
    """Load ``url`` afresh (a page load, not a hash change) and wait until ``view`` has rendered;
    the page's own render time in ms. The overview's refresh is paused: it would redraw under the
    test."""
    browser.get("about:blank")
    browser.get(url)
    ms = rendered(browser, view, within_s)
    browser.execute_script("window.fabricmon.pause()")
    return ms


def rendered(browser: Any, view: str, within_s: float = 30, after: int = 0) -> float:
    """Wait for render number ``after`` + 1 (or later) to be ``view``; its time in ms."""
    from selenium.webdriver.support.ui import WebDriverWait

    def done(d: Any) -> bool:
        count, last = d.execute_script(
            "const f = window.fabricmon; return f && f.count ? [f.count, f.renders.at(-1)] : [0, null]"
        )
        return bool(count > after and last["view"] == view)

    WebDriverWait(browser, within_s).until(done)
    last = browser.execute_script("return window.fabricmon.renders.at(-1)")
    return float(last["ms"])


def renders(browser: Any) -> int:
    return int(browser.execute_script("return window.fabricmon.count"))


def shoot(browser: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    assert browser.save_screenshot(str(ARTIFACTS / f"dashboard-{name}.png"))

"""The browser suites share one chromium per module (tests/support/browser.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browser import chromium


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as driver:
        yield driver


@pytest.fixture
def fresh(browser: Any) -> Iterator[Any]:
    """The browser with its console log drained; the test's own errors are then its own."""
    browser.set_window_size(1366, 768)
    browser.get_log("browser")
    yield browser

"""``fabricmon demo``'s tour followed in the browser, as docs/getting-started.md tells a newcomer to: run the
demo (a process of its own, on the test run's embedded store), and for each fault's incident open
the link the demo printed, follow the root cause to its port's charts (or its switch), and see the
incident's window shaded there. Every step leaves a screenshot in ``test-artifacts/``.

A whole tour is ~2.5 minutes: ``slow`` (make test-slow).
"""

from __future__ import annotations

import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from store.pgserver import EmbeddedStore
from tests.support.browser import api, console_errors, have_browser, open_view, rendered, renders, shoot

pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By

from tests.support.ports import free_port

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not have_browser(), reason="chromium and chromedriver are not installed"),
]
LINK = re.compile(r"follow it in the dashboard: (http://\S+/#/incident/(\d+))")


@pytest.fixture(scope="module")
def demo(pg_store: EmbeddedStore) -> Iterator[tuple[str, list[str]]]:
    """The demo after its tour (it keeps serving): its base URL and the incident links it printed."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "demo", "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    links: list[str] = []
    lines: list[str] = []
    sel = selectors.DefaultSelector()
    sel.register(proc.stderr, selectors.EVENT_READ)
    deadline = time.monotonic() + 420
    try:
        while not any("tour done" in line for line in lines):
            assert proc.poll() is None, "".join(lines[-40:])
            assert time.monotonic() < deadline, "the tour did not finish: " + "".join(lines[-40:])
            if sel.select(timeout=1.0):
                line = proc.stderr.readline()
                lines.append(line)
                if m := LINK.search(line):
                    links.append(m.group(1))
        yield f"http://127.0.0.1:{port}", links
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        sel.close()
        proc.stderr.close()


def test_every_fault_of_the_tour_is_followed_from_its_incident_to_its_port(
    fresh: Any, demo: tuple[str, list[str]]
) -> None:
    base, links = demo
    incidents = api(base, "/v1/incidents?state=all&limit=100")["items"]
    assert len(links) == 6 and {int(link.rsplit("/", 1)[1]) for link in links} <= {a["id"] for a in incidents}
    for link in links:
        alert_id = int(link.rsplit("/", 1)[1])
        incident = next(a for a in incidents if a["id"] == alert_id)
        open_view(fresh, link, "incident")
        assert incident["summary"] in fresh.find_element(By.ID, "incident-head").text
        shoot(fresh, f"demo-{alert_id}-incident")
        root = incident["root_cause"]
        target = fresh.find_element(By.CSS_SELECTOR, "#incident-head dd a")
        n = renders(fresh)
        target.click()
        if root.get("port"):
            rendered(fresh, "port", after=n)
            chart = fresh.execute_script("return window.fabricmon.charts['port-bits']")
            ids = [w["id"] for w in chart["shade"]]
            assert alert_id in ids, (incident["summary"], chart["shade"])
            assert any(v is not None for v in chart["data"][1]), incident["summary"]  # the port's traffic
        else:
            rendered(fresh, "switchView", after=n)
            rows = fresh.find_elements(By.CSS_SELECTOR, "#switch-incidents tr[data-alert-id]")
            assert str(alert_id) in [r.get_attribute("data-alert-id") for r in rows]
        shoot(fresh, f"demo-{alert_id}-{root.get('rule') or incident['rule']}")
        assert console_errors(fresh) == [], incident["summary"]

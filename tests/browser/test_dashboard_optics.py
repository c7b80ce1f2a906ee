"""The dashboard's optics (issue 26 item 4) in a real headless browser, against a real TimescaleDB:
the seeded fabric of tests/support/api_lab.py plus six hours of one server port's transceiver DOM
(rx falling toward the module's thresholds) and FEC counters with a histogram, written through
store/dom.py and store/fec.py. The port view draws rx/tx power, laser bias, temperature and
pre-FEC BER with the module's warning and critical levels as lines (the points are /v1/optics's),
and the FEC histogram's sixteen bins; a port without optics says so; the links view ranks the
degrading link first and opens its port. Screenshots go to ``test-artifacts/``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

import pytest

from api.app import create_app
from store.db import create_pool
from store.dom import DomSample, write_dom
from store.fec import FecSample, write_fec
from store.pgserver import EmbeddedStore
from tests.conftest import run_sync
from tests.support.api_lab import CONFIG, FABRIC, port, seeded_database, serve_in_thread
from tests.support.browser import api, console_errors, have_browser, open_view, rendered, renders, shoot

pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By

pytestmark = pytest.mark.skipif(not have_browser(), reason="chromium and chromedriver are not installed")

LEAF = "lf-g1-r2"
OPTIC = port(LEAF, 1)  # a server port: its optics degrade
QUIET = port(LEAF, 2)  # no transceiver data at all
GROWTH = (10**9, 10**5, 10**3, 10, 1)  # codewords per minute in S0..S4


async def _optics(dsn: str, now: datetime) -> None:
    dom, fec = [], []
    for i in range(360):  # every minute for 6 h: rx -2 dBm falling 0.9 dB/h, bias creeping up
        at = now - timedelta(minutes=359 - i)
        dom.append(
            DomSample(
                at, LEAF, OPTIC, "Ethernet1/1-xcvr", -2.0 - 0.9 * i / 60, 1.5, 7.0 + 0.2 * i / 60, 40.0 + (i % 5) / 5,
                rx_low_warning_dbm=-7.0, rx_low_critical_dbm=-9.0, bias_high_warning_ma=11.0,
                bias_high_critical_ma=13.0,
            )
        )  # fmt: skip
        bins = tuple(g * i for g in GROWTH) + (0,) * 11
        fec.append(FecSample(at, LEAF, OPTIC, 1000 * i, 0, 10 * i, 1e-9 * 10 ** (i / 180), 0.0, bins))
    pool = await create_pool(dsn)
    try:
        async with pool.acquire() as conn:
            await write_dom(conn, dom)
            await write_fec(conn, fec)
    finally:
        await pool.close()


@pytest.fixture(scope="module")
def base_url(pg_store: EmbeddedStore) -> Iterator[str]:
    with seeded_database(pg_store) as seeded:
        run_sync(_optics(seeded.dsn, seeded.evaluated_at))
        with serve_in_thread(lambda: create_app(CONFIG, FABRIC, dsn=seeded.dsn)) as url:
            yield url


def port_url(base_url: str, name: str) -> str:
    return f"{base_url}/#/port/{LEAF}/{quote(name, safe='')}?range=6h"


def test_the_port_view_draws_the_dom_series_with_their_thresholds_and_the_fec_histogram(
    fresh: Any, base_url: str
) -> None:
    open_view(fresh, port_url(base_url, OPTIC), "port")
    fresh.execute_script("document.getElementById('optics').scrollIntoView()")
    shoot(fresh, "port-optics")
    charts = fresh.execute_script("return window.fabricmon.charts")
    assert {"optics-rx", "optics-tx", "optics-bias", "optics-temp", "optics-ber"} <= set(charts)
    rx = charts["optics-rx"]
    assert rx["labels"] == ["rx", "low warning", "low critical (module)"]
    assert charts["optics-bias"]["labels"] == ["bias", "high warning", "high critical (module)"]
    assert charts["optics-ber"]["labels"] == ["pre-FEC BER", "critical (configured)"]
    # the points are /v1/optics's for the same range, the threshold lines the module's levels
    (source,) = rx["sources"]
    assert source.startswith("/v1/optics?")
    body = api(base_url, source)
    assert rx["data"][0] == [datetime.fromisoformat(p["time"]).timestamp() for p in body["dom"]]
    assert rx["data"][1] == [p["rx_power_dbm"] for p in body["dom"]]
    assert set(rx["data"][2]) == {-7.0} and set(rx["data"][3]) == {-9.0}
    assert min(rx["data"][1]) < -7.0  # past the warning line by the end of the window
    bars = fresh.find_elements(By.CSS_SELECTOR, "#fec-histogram .bin")
    assert [int(b.get_attribute("data-count")) for b in bars] == body["histogram"]["bins"]
    assert len(bars) == 16 and body["histogram"]["bins"][:5] == [g * 359 for g in GROWTH]
    assert "predicted frame loss" in fresh.find_element(By.ID, "fec-histogram").text
    assert "transceiver Ethernet1/1-xcvr" in fresh.find_element(By.ID, "optics").text
    fresh.execute_script("document.getElementById('fec-histogram').scrollIntoView()")
    shoot(fresh, "port-fec-histogram")
    assert console_errors(fresh) == []


def test_a_port_without_optics_says_so(fresh: Any, base_url: str) -> None:
    open_view(fresh, port_url(base_url, QUIET), "port")
    assert "no transceiver or FEC data" in fresh.find_element(By.ID, "optics-none").text
    assert not fresh.find_elements(By.CSS_SELECTOR, "#optics-charts")
    assert console_errors(fresh) == []


def test_the_links_view_ranks_the_degrading_link_first_and_opens_its_optics(fresh: Any, base_url: str) -> None:
    open_view(fresh, f"{base_url}/#/links", "links")
    shoot(fresh, "links")
    rows = fresh.find_elements(By.CSS_SELECTOR, "#links-health tbody tr")
    assert rows and rows[0].get_attribute("data-link") == f"{LEAF}:{OPTIC}"
    assert " h" in rows[0].text or "min" in rows[0].text  # a time to failure, not "no trend"
    n = renders(fresh)
    rows[0].find_element(By.TAG_NAME, "a").click()
    rendered(fresh, "port", after=n)
    assert fresh.find_elements(By.CSS_SELECTOR, "#optics-charts .uplot")
    # the header reaches the links view from any view
    n = renders(fresh)
    fresh.find_element(By.ID, "nav-links").click()
    rendered(fresh, "links", after=n)
    assert console_errors(fresh) == []

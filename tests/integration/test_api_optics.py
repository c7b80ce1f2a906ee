"""``GET /v1/optics`` (issue 26) on a real server and database, rows written through store/dom.py
and store/fec.py as the collectors' writers lay them out: one port's DOM and FEC per bucket, the
module's thresholds (the configured ones where it has none), its FEC histogram over the range and
the frame loss it predicts (since the counters' last clear); a port without data answers empty;
unknown names are 404; ``/v1/links/health`` items link to it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from aiohttp.test_utils import TestClient, TestServer

from analyzer.link_trend import predicted_flr
from api.app import create_app
from config.model import Config
from fabric.model import FabricParams
from fabric.topology import build_aipod
from store.db import create_pool
from store.dom import DomSample, write_dom
from store.fec import FecSample, write_fec
from store.inventory import ensure_fabric
from store.migrate import migrate

FABRIC = build_aipod(FabricParams(gpus=128, radix=16), "mixed")
LEAF = "lf-g1-r1"  # SR OS-style names: '1/1/c1/1' travels percent-encoded
PORTS = [p.name for p in FABRIC.ports(LEAF) if p.peer is not None]
_now = datetime.now(UTC)
NOW = _now.replace(minute=_now.minute // 10 * 10, second=0, microsecond=0)  # buckets align to the epoch
START = NOW - timedelta(hours=1)
#: per FEC sample (every 10 s): codewords by symbol errors S0..S3
GROWTH = (10**9, 10**4, 100, 1)


def _bins(k: int) -> tuple[int, ...]:
    return tuple(g * k for g in GROWTH) + (0,) * 12


@pytest.fixture
async def client(fresh_db: str) -> AsyncIterator[TestClient[Any, Any]]:
    pool = await create_pool(fresh_db)
    dom: list[DomSample] = []
    for i in range(60):  # every minute for the last hour: rx -1 dB/h, bias +0.6 mA/h
        at = START + timedelta(minutes=i)
        dom.append(
            DomSample(
                at, LEAF, PORTS[0], "xcvr-0", -2.0 - i / 60, 1.0, 7.0 + i / 100, 40.0 + (i % 2),
                rx_low_warning_dbm=-8.0, rx_low_critical_dbm=-10.0, bias_high_warning_ma=11.0,
                bias_high_critical_ma=13.0,
            )
        )  # fmt: skip
        dom.append(DomSample(at, LEAF, PORTS[1], "xcvr-1", -3.0))  # a module without thresholds
    fec = [
        FecSample(START + timedelta(seconds=10 * k), LEAF, PORTS[0], 1000 * k, 0, 5 * k, 1e-8, 0.0, _bins(k))
        for k in range(360)
    ]
    # counters cleared half way: the histogram counts from the clear
    fec += [
        FecSample(START + timedelta(seconds=10 * k), LEAF, PORTS[1], bins=_bins(k if k < 180 else k - 180))
        for k in range(360)
    ]
    async with pool.acquire() as conn:
        await migrate(conn)
        await ensure_fabric(conn, FABRIC)
        await write_dom(conn, dom)
        await write_fec(conn, fec)
    app = create_app(Config(), FABRIC, pool=pool)
    try:
        async with TestClient(TestServer(app)) as c:
            yield c
    finally:
        await pool.close()


async def optics(
    client: TestClient[Any, Any], port: str, query: dict[str, str] | None = None, status: int = 200
) -> dict[str, Any]:
    resp = await client.get(f"/v1/optics?{urlencode({'switch': LEAF, 'port': port, **(query or {})})}")
    assert resp.status == status, await resp.text()
    body: dict[str, Any] = await resp.json()
    return body


async def test_a_port_s_dom_and_fec_per_bucket_with_its_module_s_thresholds(client: TestClient[Any, Any]) -> None:
    body = await optics(client, PORTS[0], {"from": START.isoformat(), "to": NOW.isoformat(), "step": "10m"})
    assert body["step_s"] == 600 and body["component"] == "xcvr-0"
    assert body["thresholds"] == {
        "rx_low_warning_dbm": -8.0, "rx_low_critical_dbm": -10.0, "rx_from": "module",
        "bias_high_warning_ma": 11.0, "bias_high_critical_ma": 13.0, "bias_from": "module",
        "pre_fec_ber_critical": 2.4e-4,
    }  # fmt: skip
    dom = body["dom"]
    assert len(dom) == 6
    # the first bucket holds minutes 0..9: rx -2 - i/60, mean at i = 4.5
    assert dom[0]["rx_power_dbm"] == pytest.approx(-2.075) and dom[0]["tx_power_dbm"] == 1.0
    assert dom[-1]["rx_power_dbm"] == pytest.approx(-2.0 - 54.5 / 60)
    assert dom[0]["laser_bias_ma"] == pytest.approx(7.045) and dom[0]["temperature_c"] == pytest.approx(40.5)
    fec = body["fec"]
    assert len(fec) == 6 and all(f["pre_fec_ber"] == pytest.approx(1e-8) for f in fec)
    assert all(f["corrected_per_s"] == pytest.approx(100.0) for f in fec)  # 1000 per 10 s
    assert fec[0]["uncorrectable_per_s"] in (0.0, None) and fec[1]["uncorrectable_per_s"] == 0.0
    hist = body["histogram"]
    assert hist["bins"] == [g * 359 for g in GROWTH] + [0] * 12  # from the first sample to the last
    assert hist["predicted_flr"] == pytest.approx(predicted_flr(hist["bins"]))
    assert 0 < hist["predicted_flr"] < 1e-9


async def test_the_default_range_is_the_trend_window(client: TestClient[Any, Any]) -> None:
    body = await optics(client, PORTS[0])
    span = datetime.fromisoformat(body["end"]) - datetime.fromisoformat(body["start"])
    assert span == timedelta(hours=6) and len(body["dom"]) > 0


async def test_a_module_without_thresholds_shows_the_configured_ones_and_a_histogram_counts_from_a_clear(
    client: TestClient[Any, Any],
) -> None:
    body = await optics(client, PORTS[1])
    th = body["thresholds"]
    assert (th["rx_low_critical_dbm"], th["rx_from"], th["rx_low_warning_dbm"]) == (-10.0, "configured", None)
    assert (th["bias_high_critical_ma"], th["bias_from"]) == (13.0, "configured")
    assert body["dom"][0]["laser_bias_ma"] is None
    hist = body["histogram"]  # the growth since the clear, not last minus first (which is positive too)
    assert datetime.fromisoformat(hist["start"]) == START + timedelta(seconds=1800)
    assert hist["bins"] == [g * 179 for g in GROWTH] + [0] * 12
    half = {"from": START.isoformat(), "to": (START + timedelta(seconds=1795)).isoformat()}
    before = await optics(client, PORTS[1], half)
    assert before["histogram"]["bins"][:4] == [g * 179 for g in GROWTH]


async def test_a_port_without_data_is_empty_and_unknown_names_are_404(client: TestClient[Any, Any]) -> None:
    body = await optics(client, PORTS[2])
    assert (body["dom"], body["fec"], body["histogram"], body["component"]) == ([], [], None, None)
    assert (await optics(client, "no-such-port", status=404))["type"].endswith("unknown-port")
    resp = await client.get(f"/v1/optics?{urlencode({'switch': 'no-such', 'port': PORTS[0]})}")
    assert resp.status == 404 and (await resp.json())["type"].endswith("unknown-switch")
    six_hours = {"from": (NOW - timedelta(hours=6)).isoformat(), "to": NOW.isoformat()}
    assert (await optics(client, PORTS[0], {**six_hours, "step": "1s"}, 422))["type"].endswith("too-many-points")


async def test_links_health_items_link_to_their_optics(client: TestClient[Any, Any]) -> None:
    items = (await (await client.get("/v1/links/health")).json())["items"]
    first = next(i for i in items if i["port"] == PORTS[0])
    resp = await client.get(first["optics"])
    assert resp.status == 200 and (await resp.json())["port"] == PORTS[0]


async def test_the_openapi_document_describes_the_route(client: TestClient[Any, Any]) -> None:
    doc = await (await client.get("/openapi.json")).json()
    op = doc["paths"]["/v1/optics"]["get"]
    assert "FEC histogram" in op["summary"]
    assert {p["name"] for p in op["parameters"]} == {"switch", "port", "from", "to", "step"}
    assert "OpticsThresholds" in doc["components"]["schemas"]

"""The dashboard in a real headless browser (Debian's chromium, driven by selenium through Debian's
chromedriver), against a real TimescaleDB holding a simulated fabric with faults and a history of
evaluations (tests/support/api_lab.py: a leaf uplink down, a PFC storm, a registered job).

Each view loads without console errors and leaves a screenshot in ``test-artifacts/``; a fault is
followed from the map cell to its rail, switch and port, where the chart shows the drop inside the
shaded incident window and its points are the API's; the incident view lists the symptoms the
analyzer grouped; the job view shows its hosts and the incident under them; a stale verdict is
grey, never green; tokens, the keyboard and a narrow window work. At 16,384 GPUs (``slow``) the
views load and the render times are recorded in ``test-artifacts/dashboard-16k.json``.

Skipped where chromium, chromedriver or selenium are missing (``make setup`` installs them).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import pytest

from api.app import create_app
from config.model import Config
from fabric.model import Fabric, FabricParams
from fabric.topology import build_aipod
from store.db import create_pool
from store.jobs import Job, save_job
from store.pgserver import EmbeddedStore
from tests.conftest import run_sync
from tests.support.api_lab import CONFIG, DOWN_LEAF, FABRIC, JOB_HOSTS, STORM_LEAF, seeded_database, serve_in_thread
from tests.support.browser import ARTIFACTS, api, console_errors, have_browser, open_view, rendered, renders, shoot

pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

JOB = "train-42"
ROUNDS, EVALUATE_EVERY = 24, 3  # 4 minutes of telemetry, an evaluation every 30 s

pytestmark = pytest.mark.skipif(not have_browser(), reason="chromium and chromedriver are not installed")


async def _register_job(dsn: str, hosts: list[str]) -> None:
    pool = await create_pool(dsn)
    try:
        async with pool.acquire() as conn:
            await save_job(conn, Job(JOB, tuple(hosts), started_at=datetime.now(UTC), expected_days=10.0))
    finally:
        await pool.close()


async def _age_verdicts(dsn: str, hours: float) -> None:
    # Moved rows are copied and put back, not updated in place: an UPDATE of a
    # hypertable's time column cannot move a row into another chunk, so shifting
    # the rounds back across midnight UTC (the chunks are a day) failed in CI.
    pool = await create_pool(dsn)
    try:
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute("CREATE TEMP TABLE aged ON COMMIT DROP AS SELECT * FROM analyzer_runs")
            await conn.execute("UPDATE aged SET time = time - $1 * interval '1 hour'", hours)
            await conn.execute("DELETE FROM analyzer_runs")
            await conn.execute("INSERT INTO analyzer_runs SELECT * FROM aged")
    finally:
        await pool.close()


@pytest.fixture(scope="module")
def base_url(pg_store: EmbeddedStore) -> Iterator[str]:
    with seeded_database(pg_store, rounds=ROUNDS, evaluate_every=EVALUATE_EVERY) as seeded:
        run_sync(_register_job(seeded.dsn, JOB_HOSTS))
        with serve_in_thread(lambda: create_app(CONFIG, FABRIC, dsn=seeded.dsn)) as url:
            yield url


def incident_of(base_url: str, leaf: str) -> dict[str, Any]:
    items = api(base_url, "/v1/incidents?state=firing&limit=100")["items"]
    return next(a for a in items if a["root_cause"].get("switch") == leaf)


def views(base_url: str) -> list[tuple[str, str, str]]:
    down = incident_of(base_url, DOWN_LEAF)
    return [
        ("overview", "#/", "overview"),
        ("rail", "#/rail/3?group=2", "rail"),
        ("switch", f"#/switch/{DOWN_LEAF}", "switchView"),
        # a vendor port name travels percent-encoded ("et-0/0/8:0" holds '/' and ':')
        ("port", f"#/port/{DOWN_LEAF}/{quote(down['root_cause']['port'], safe='')}?range=1h", "port"),
        ("incident", f"#/incident/{down['id']}", "incident"),
        ("job", f"#/job/{JOB}", "job"),
    ]


def test_each_view_loads_without_console_errors(fresh: Any, base_url: str) -> None:
    for name, route, view in views(base_url):
        open_view(fresh, f"{base_url}/{route}", view)
        assert not fresh.find_elements(By.CSS_SELECTOR, "#view p.error"), (name, fresh.find_element(By.ID, "view").text)
        shoot(fresh, name)
        assert console_errors(fresh) == [], name


def test_the_overview_shows_the_fabric_its_incidents_and_its_history(fresh: Any, base_url: str) -> None:
    open_view(fresh, f"{base_url}/?refresh=2", "overview")
    cells = fresh.find_elements(By.CSS_SELECTOR, "#heatmap .cell")
    assert len(cells) == 8 * 4  # rails x groups
    status = {
        (c.get_attribute("data-rail"), c.get_attribute("data-group")): c.get_attribute("data-status") for c in cells
    }
    assert status[("3", "2")] != "healthy"  # the leaf whose uplink is down
    assert status[("5", "3")] == "critical"  # the PFC storm
    assert status[("1", "1")] == "healthy"
    assert fresh.find_element(By.ID, "overall").get_attribute("data-status") == "critical"
    hrefs = {c.get_attribute("href").split("#", 1)[1] for c in cells}
    assert "/rail/3?group=2" in hrefs and len(hrefs) == 32  # every cell links to its rail and group

    rows = fresh.find_elements(By.CSS_SELECTOR, "#alerts tr[data-severity]")
    text = "\n".join(r.text for r in rows)
    assert DOWN_LEAF in text and STORM_LEAF in text and "GPUs" in text
    assert DOWN_LEAF in fresh.find_element(By.ID, "over").text
    assert "link availability" in fresh.find_element(By.ID, "slo").text

    # the history charts draw what /v1/history holds: an evaluation every 30 s
    charts = fresh.execute_script("return window.fabricmon.charts")
    assert {"overview-ratio", "overview-capacity", "overview-budget"} <= set(charts)
    capacity = charts["overview-capacity"]
    rail3 = capacity["data"][capacity["labels"].index("rail 3") + 1]
    points = [v for v in rail3 if v is not None]
    assert len(points) >= ROUNDS // EVALUATE_EVERY - 1 and min(points) < 1.0, rail3  # the uplink down shows

    # the summary fits a 1366x768 screen: nothing to scroll
    doc_h, view_h = fresh.execute_script("return [document.documentElement.scrollHeight, window.innerHeight]")
    assert doc_h <= view_h
    fresh.execute_script("window.fabricmon.resume()")
    for _ in range(3):  # it refreshes by itself, and every refresh's charts replace the last ones
        rendered(fresh, "overview", 20, after=renders(fresh))
    live, drawn = fresh.execute_script("return [window.fabricmon.live(), document.querySelectorAll('.uplot').length]")
    assert live == drawn == 3
    assert console_errors(fresh) == []


def test_a_fault_is_followed_from_the_map_to_the_ports_chart(fresh: Any, base_url: str) -> None:
    down = incident_of(base_url, DOWN_LEAF)
    open_view(fresh, f"{base_url}/#/", "overview")
    n = renders(fresh)
    fresh.find_element(By.CSS_SELECTOR, '#heatmap .cell[data-rail="3"][data-group="2"]').click()
    rendered(fresh, "rail", after=n)
    assert fresh.current_url.endswith("#/rail/3?group=2")
    marked = fresh.find_element(By.CSS_SELECTOR, "#rail-switches tr.marked")
    assert marked.get_attribute("data-switch") == DOWN_LEAF

    n = renders(fresh)
    marked.find_element(By.TAG_NAME, "a").click()
    rendered(fresh, "switchView", after=n)
    assert str(down["id"]) in [
        r.get_attribute("data-alert-id") for r in fresh.find_elements(By.CSS_SELECTOR, "#switch-incidents tr")
    ]
    port = down["root_cause"]["port"]
    row = fresh.find_element(By.CSS_SELECTOR, f'#ports tr[data-port="{port}"]')
    assert "DOWN" in row.text.upper()
    assert fresh.find_elements(By.CSS_SELECTOR, "#ports td.spark canvas")  # sparklines drawn

    n = renders(fresh)
    row.find_element(By.TAG_NAME, "a").click()
    rendered(fresh, "port", after=n)
    shoot(fresh, "port-followed")
    chart = fresh.execute_script("return window.fabricmon.charts['port-bits']")
    (window,) = [w for w in chart["shade"] if w["id"] == down["id"]]
    times, ins = chart["data"][0], chart["data"][1]
    # the window is widened to whole buckets: it starts with the bucket the incident opened in,
    # which may still hold the last samples before the drop (the analyzer sees an outage a sample
    # or two after it)
    before = [v for t, v in zip(times, ins, strict=True) if v is not None and t <= window["start"]]
    inside = [v for t, v in zip(times, ins, strict=True) if v is not None and t > window["start"]]
    assert before and len(inside) >= 3, chart
    assert max(before) > 1e9 and max(inside) < 1e6, chart  # traffic, then nothing all through the window

    # the chart's points are /v1/series's for the same range
    for source, column in zip(chart["sources"], chart["data"][1:], strict=True):
        points = [(datetime.fromisoformat(p["time"]).timestamp(), p["value"]) for p in api(base_url, source)["points"]]
        drawn = [(t, v) for t, v in zip(times, column, strict=True) if v is not None]
        assert drawn and drawn == [(t, v) for t, v in points if v is not None], source
    assert console_errors(fresh) == []


def test_the_incident_view_lists_the_symptoms_the_analyzer_grouped(fresh: Any, base_url: str) -> None:
    down = api(base_url, f"/v1/incidents/{incident_of(base_url, DOWN_LEAF)['id']}")
    assert down["symptoms"], down
    open_view(fresh, f"{base_url}/#/incident/{down['id']}", "incident")
    rules = [r.get_attribute("data-rule") for r in fresh.find_elements(By.CSS_SELECTOR, "#symptoms tbody tr")]
    assert rules == [s["rule"] for s in down["symptoms"]]
    assert down["summary"] in fresh.find_element(By.ID, "incident-head").text
    assert fresh.find_element(By.ID, "action").text.startswith(down["recommended_action"])
    kinds = [r.get_attribute("data-kind") for r in fresh.find_elements(By.CSS_SELECTOR, "#timeline tbody tr")]
    assert kinds.count("transition") == len(down["timeline"]) >= 1
    marked = fresh.find_elements(By.CSS_SELECTOR, "#incident-map .cell.marked")
    assert {(c.get_attribute("data-rail"), c.get_attribute("data-group")) for c in marked} >= {("3", "2")}
    assert len(marked) < 32  # the blast radius, not the fabric
    assert console_errors(fresh) == []


def test_the_job_view_shows_its_hosts_and_the_incident_under_them(fresh: Any, base_url: str) -> None:
    down = incident_of(base_url, DOWN_LEAF)
    open_view(fresh, f"{base_url}/#/job/{JOB}", "job")
    hosts = fresh.find_element(By.ID, "job-hosts").text
    assert all(h in hosts for h in JOB_HOSTS), hosts
    ids = [r.get_attribute("data-alert-id") for r in fresh.find_elements(By.CSS_SELECTOR, "#job-faults tbody tr")]
    assert str(down["id"]) in ids
    marked = fresh.find_elements(By.CSS_SELECTOR, "#job-map .cell.marked")
    assert {c.get_attribute("data-group") for c in marked} == {"2"} and len(marked) == 8  # group 2, every rail
    assert console_errors(fresh) == []


MAP_AT = """
const [groupCount, done] = arguments;
import("/dashboard/map.js").then(({ renderMap }) => {
  const groups = Array.from({ length: groupCount }, (_, i) => i + 1);
  const rails = Array.from({ length: 8 }, (_, i) => ({
    rail: i + 1, status: "healthy", bottleneck_fraction: 1, load_gbps: 0, pfc_pause_ratio: 0, bottleneck: null,
    groups: groups.map((g) => ({ group: g, status: i === 2 && g === groupCount ? "critical" : "healthy",
                                 findings: 0, summaries: [] })),
  }));
  const map = document.querySelector("#heatmap");
  renderMap(map, { groups, rails, asymmetry: null });
  const box = (e) => e.getBoundingClientRect();
  const cells = [...map.querySelectorAll(".cell")].map(box);
  const labels = [...map.querySelectorAll(".label.col")].filter((e) => e.textContent).map((e) => {
    const r = document.createRange(); r.selectNodeContents(e); return r.getBoundingClientRect(); });
  const panel = box(map);
  done({
    cells: cells.length,
    minWidth: Math.min(...cells.map((c) => c.width)),
    minHeight: Math.min(...cells.map((c) => c.height)),
    inside: cells.every((c) => c.right <= panel.right + 0.5 && c.bottom <= panel.bottom + 0.5),
    labels: labels.length, overlap: labels.some((a, i) => i > 0 && a.left < labels[i - 1].right),
    critical: map.querySelector(`.cell[data-rail="3"][data-group="${groupCount}"]`).dataset.status,
  });
});
"""


@pytest.mark.parametrize("groups", [1, 4, 32, 64])
def test_the_map_stays_readable_from_1_to_64_groups(fresh: Any, base_url: str, groups: int) -> None:
    """16K GPUs are 32 groups, 32K (radix 128's 3-tier limit at radix 64 leaves) are 64: the map's
    cells stay wide enough to see and click, inside the panel, with group labels that never collide."""
    open_view(fresh, f"{base_url}/#/", "overview")
    m = fresh.execute_async_script(MAP_AT, groups)
    assert m["cells"] == 8 * groups and m["inside"], m
    assert m["minWidth"] >= 4 and m["minHeight"] >= 12, m
    assert 1 <= m["labels"] <= 16 and not m["overlap"], m
    assert m["critical"] == "critical"
    shoot(fresh, f"map-{groups}-groups")


def test_the_keyboard_reaches_a_cell_and_opens_its_rail(fresh: Any, base_url: str) -> None:
    open_view(fresh, f"{base_url}/#/", "overview")
    body = fresh.find_element(By.TAG_NAME, "body")
    for _ in range(80):
        body.send_keys(Keys.TAB) if _ == 0 else fresh.switch_to.active_element.send_keys(Keys.TAB)
        if "cell" in (fresh.switch_to.active_element.get_attribute("class") or ""):
            break
    active = fresh.switch_to.active_element
    assert "cell" in (active.get_attribute("class") or ""), "no map cell is reachable with Tab"
    rail = active.get_attribute("data-rail")
    n = renders(fresh)
    active.send_keys(Keys.ENTER)
    rendered(fresh, "rail", after=n)
    assert f"#/rail/{rail}?group=" in fresh.current_url


def test_a_narrow_window_scrolls_down_never_sideways(fresh: Any, base_url: str) -> None:
    fresh.set_window_size(480, 900)
    for name, route, view in views(base_url):
        open_view(fresh, f"{base_url}/{route}", view)
        scroll_w, inner_w = fresh.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
        assert scroll_w <= inner_w, (name, scroll_w, inner_w)
        page = fresh.execute_script(
            "const p = document.querySelector('#view > div'); return [p.scrollWidth, p.clientWidth]"
        )
        assert page[0] <= page[1], (name, page)  # a wide table scrolls inside itself
    shoot(fresh, "narrow-job")
    assert console_errors(fresh) == []


@pytest.fixture(scope="module")
def stale_url(pg_store: EmbeddedStore) -> Iterator[str]:
    with seeded_database(pg_store) as seeded:
        run_sync(_register_job(seeded.dsn, JOB_HOSTS))
        run_sync(_age_verdicts(seeded.dsn, hours=2))
        with serve_in_thread(lambda: create_app(CONFIG, FABRIC, dsn=seeded.dsn)) as url:
            yield url


def test_a_stale_verdict_is_grey_never_green(fresh: Any, stale_url: str) -> None:
    open_view(fresh, f"{stale_url}/#/", "overview")
    assert fresh.find_element(By.ID, "overall").get_attribute("data-status") == "unknown"
    assert "stale" in fresh.find_element(By.ID, "overall").text.lower()
    assert not fresh.find_element(By.ID, "stale").get_attribute("hidden")
    cells = fresh.find_elements(By.CSS_SELECTOR, "#heatmap .cell")
    assert cells and {c.get_attribute("data-status") for c in cells} == {"unknown"}
    shoot(fresh, "stale")
    # ... and so is every view that shows the verdict
    for name, route, view in views(stale_url):
        if name in ("overview", "port"):  # the port's charts are telemetry, not a verdict
            continue
        open_view(fresh, f"{stale_url}/{route}", view)
        status = fresh.find_element(By.ID, "status")
        assert "unknown" in status.get_attribute("class") and "stale" in status.text.lower(), name
        shown = {c.get_attribute("data-status") for c in fresh.find_elements(By.CSS_SELECTOR, "#view .cell")}
        assert shown <= {"unknown"}, (name, shown)
        rows = fresh.find_elements(By.CSS_SELECTOR, "#rail-switches tbody tr")
        assert all("unknown" in r.get_attribute("class") for r in rows), name
    assert console_errors(fresh) == []


async def _uplinks_all_down_at_the_newest(dsn: str) -> None:
    pool = await create_pool(dsn)
    try:
        await pool.execute(
            "UPDATE analyzer_runs SET worst_ratio = 'Infinity' WHERE time = (SELECT max(time) FROM analyzer_runs)"
        )
    finally:
        await pool.close()


@pytest.fixture(scope="module")
def infinite_url(pg_store: EmbeddedStore) -> Iterator[str]:
    with seeded_database(pg_store, rounds=ROUNDS, evaluate_every=EVALUATE_EVERY) as seeded:
        run_sync(_uplinks_all_down_at_the_newest(seeded.dsn))
        with serve_in_thread(lambda: create_app(CONFIG, FABRIC, dsn=seeded.dsn)) as url:
            yield url


def test_an_infinite_ratio_is_a_solid_band_not_a_gap(fresh: Any, infinite_url: str) -> None:
    open_view(fresh, f"{infinite_url}/#/", "overview")
    chart = fresh.execute_script("return window.fabricmon.charts['overview-ratio']")
    (band,) = [w for w in chart["shade"] if w.get("infinite")]
    history = api(infinite_url, "/v1/history")
    (i,) = history["ratio_infinite"]["worst switch"]
    assert band["start"] == history["times"][i] and history["ratio"]["worst switch"][i] is None
    shoot(fresh, "infinite-ratio")
    assert console_errors(fresh) == []


@pytest.fixture(scope="module")
def token_url(pg_store: EmbeddedStore) -> Iterator[str]:
    config = Config.model_validate({"api": {"tokens": ["s3cret-token"]}})
    with (
        seeded_database(pg_store) as seeded,
        serve_in_thread(lambda: create_app(config, FABRIC, dsn=seeded.dsn)) as url,
    ):
        yield url


def test_with_api_tokens_it_asks_for_one_and_then_works(fresh: Any, token_url: str) -> None:
    fresh.get(f"{token_url}/#/")
    WebDriverWait(fresh, 20).until(lambda d: d.find_element(By.ID, "token-dialog").get_attribute("open") is not None)
    fresh.find_element(By.ID, "token").send_keys("s3cret-token")
    fresh.find_element(By.CSS_SELECTOR, "#token-form button").click()
    WebDriverWait(fresh, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#heatmap .cell"))
    assert fresh.find_element(By.ID, "overall").get_attribute("data-status") == "critical"
    fresh.execute_script("sessionStorage.clear()")
    # only the requests before the token was typed were refused
    refused = [e for e in console_errors(fresh) if "401" not in e["message"]]
    assert refused == []


# --- 16,384 GPUs ------------------------------------------------------------------------------

FABRIC_16K: Fabric = build_aipod(FabricParams(gpus=16_384))


@pytest.fixture(scope="module")
def url_16k(pg_store: EmbeddedStore) -> Iterator[str]:
    with seeded_database(pg_store, rounds=6, evaluate_every=2, fabric=FABRIC_16K) as seeded:
        hosts = [s.name for s in FABRIC_16K.servers.values() if s.group in range(1, 9)]
        run_sync(_register_job(seeded.dsn, hosts))
        with serve_in_thread(lambda: create_app(CONFIG, FABRIC_16K, dsn=seeded.dsn)) as url:
            yield url


def _best_of(n: int, load: Callable[[], float]) -> list[float]:
    return [round(load(), 1) for _ in range(n)]


@pytest.mark.slow
def test_at_16384_gpus_every_view_loads_and_its_render_time_is_recorded(fresh: Any, url_16k: str) -> None:
    groups = len(api(url_16k, "/v1/rails")["groups"])
    assert groups >= 32
    figures: dict[str, Any] = {"gpus": 16_384, "groups": groups, "views_ms": {}}
    for name, route, view in views(url_16k):
        times = _best_of(3, lambda r=route, v=view: open_view(fresh, f"{url_16k}/{r}", v, within_s=60))  # type: ignore[misc]
        assert not fresh.find_elements(By.CSS_SELECTOR, "#view p.error"), name
        figures["views_ms"][name] = times
        shoot(fresh, f"16k-{name}")
        assert console_errors(fresh) == [], name
    cells = fresh.execute_script("return document.querySelectorAll('#job-map .cell').length")
    assert cells == 8 * groups
    figures["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "dashboard-16k.json").write_text(json.dumps(figures, indent=2) + "\n")

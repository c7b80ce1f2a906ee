"""The simulator's control endpoint on a real in-process server, its timer task, and scenarios."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import ClientResponse, web
from aiohttp.test_utils import TestClient, TestServer

from fabric.model import FabricParams
from fabric.topology import build_aipod
from simulator.control import PROBLEM_TYPE, create_control_app
from simulator.fabric_state import FabricState
from simulator.faults import FaultKind
from simulator.scenario import ScenarioError, builtin_scenarios, load_scenario, parse_scenario, play

FABRIC = build_aipod(FabricParams(gpus=128, radix=16))
Client = TestClient[web.Request, web.Application]


@pytest.fixture
async def state() -> AsyncIterator[FabricState]:
    yield FabricState(FABRIC, seed=1)


@pytest.fixture
async def client(state: FabricState) -> AsyncIterator[Client]:
    async with TestClient(TestServer(create_control_app(state, run_state=True))) as client:
        yield client


async def expect_problem(resp: ClientResponse, status: int, detail: str) -> dict[str, Any]:
    assert resp.status == status
    assert resp.content_type == PROBLEM_TYPE
    body: dict[str, Any] = await resp.json(content_type=PROBLEM_TYPE)
    assert set(body) == {"type", "title", "status", "detail"} and body["status"] == status
    assert detail in body["detail"], body
    return body


async def test_post_list_get_and_delete_a_fault(client: Client, state: FabricState) -> None:
    resp = await client.post("/faults", json={"kind": "link_down", "switch": "lf-g1-r1"})
    assert resp.status == 201
    fault = await resp.json()
    assert fault["kind"] == "link_down" and fault["port"] == "swp9" and fault["id"]
    assert fault["started_at"].endswith("Z") and resp.headers["Location"] == f"/faults/{fault['id']}"
    assert not next(p for p in state.ports("lf-g1-r1") if p.name == "swp9").oper_up

    resp = await client.get("/faults")
    assert resp.status == 200 and [f["id"] for f in (await resp.json())["faults"]] == [fault["id"]]
    resp = await client.get(f"/faults/{fault['id']}")
    assert resp.status == 200 and (await resp.json())["port"] == "swp9"

    resp = await client.delete(f"/faults/{fault['id']}")
    assert resp.status == 204 and state.active() == []
    assert next(p for p in state.ports("lf-g1-r1") if p.name == "swp9").oper_up
    await expect_problem(await client.delete(f"/faults/{fault['id']}"), 404, "no active fault")
    await expect_problem(await client.get("/faults/nope"), 404, "no active fault 'nope'")


async def test_every_kind_can_be_posted_with_its_choices_reported(client: Client) -> None:
    bodies: list[dict[str, Any]] = [
        {"kind": "link_flap", "switch": "lf-g1-r2", "period_s": 5},
        {"kind": "speed_degrade", "switch": "sp-r1-1", "speed_gbps": 200},
        {"kind": "pfc_storm", "switch": "lf-g2-r1"},
        {"kind": "error_burst", "switch": "ssp-1", "port": "swp2", "rate_pps": 10},
        {"kind": "miswire", "server": "srv-g2-003", "gpu": 4, "to_leaf": "lf-g2-r5"},
        {"kind": "switch_unreachable", "switch": "ssp-2"},
        {"kind": "reboot", "switch": "lf-g2-r8", "boot_s": 1},
    ]
    for body in bodies:
        resp = await client.post("/faults", json=body)
        assert resp.status == 201, await resp.text()
        applied = await resp.json()
        assert applied["kind"] == body["kind"] and applied["switch"]
    listed: dict[str, Any] = await (await client.get("/faults")).json()
    applied_pfc = listed["faults"][2]
    assert (applied_pfc["port"], applied_pfc["priority"], applied_pfc["rate_pps"]) == ("swp9", 3, 5000.0)
    miswire = listed["faults"][4]
    assert (miswire["switch"], miswire["to_port"], miswire["swapped_with"]) == (
        "lf-g2-r4",
        "swp3",
        "srv-g2-003:nic5",
    )


@pytest.mark.parametrize(
    ("body", "status", "detail"),
    [
        (b"{not json", 400, "not JSON"),
        (b"[1, 2]", 400, "must be a JSON object"),
        (b'{"kind": "melt", "switch": "lf-g1-r1"}', 400, "unknown fault kind 'melt'"),
        (b'{"kind": "link_down", "switch": "lf-g9-r9"}', 400, "unknown switch 'lf-g9-r9'"),
        (b'{"kind": "link_down", "switch": "lf-g1-r1", "port": "swp77"}', 400, "unknown port 'swp77'"),
        (b'{"kind": "pfc_storm", "switch": "lf-g1-r1", "rate_pps": -5}', 400, "'rate_pps' must be > 0"),
    ],
)
async def test_bad_input_is_a_400_problem(client: Client, body: bytes, status: int, detail: str) -> None:
    resp = await client.post("/faults", data=body, headers={"Content-Type": "application/json"})
    await expect_problem(resp, status, detail)


async def test_conflicts_and_unknown_routes_are_problems_too(client: Client) -> None:
    resp = await client.post("/faults", json={"kind": "link_down", "switch": "lf-g1-r1", "id": "cut"})
    assert resp.status == 201 and (await resp.json())["id"] == "cut"
    again = await client.post("/faults", json={"kind": "link_down", "switch": "lf-g1-r2", "id": "cut"})
    await expect_problem(again, 409, "already active")
    await expect_problem(await client.get("/nothing"), 404, "Not Found")
    await expect_problem(await client.put("/faults", json={}), 405, "Method Not Allowed")


async def test_the_state_task_fires_flap_toggles_on_time(client: Client, state: FabricState) -> None:
    seen: list[tuple[str, str | None]] = []

    def listener(switch: str, port: str | None) -> None:
        seen.append((switch, port))

    state.add_listener(listener)
    resp = await client.post("/faults", json={"kind": "link_flap", "switch": "lf-g1-r3", "period_s": 0.2})
    assert resp.status == 201
    await asyncio.sleep(0.55)
    toggles = seen.count(("lf-g1-r3", "swp9"))
    assert 4 <= toggles <= 8  # at 0 (the apply), then every 0.1 s: about 6
    state.remove_listener(listener)
    state.remove_listener(listener)  # an unknown listener is ignored


async def test_a_scenario_plays_on_time_with_speedup(state: FabricState) -> None:
    scenario = parse_scenario(
        """
faults:
  - {at_s: 0, clear_after_s: 2, kind: link_down, switch: lf-g1-r1}
  - {at_s: 1, kind: switch_unreachable, switch: ssp-1}
""",
        fabric=FABRIC,
    )
    task = asyncio.create_task(play(state, scenario, speedup=5))
    await asyncio.sleep(0.05)
    assert [f.spec.kind.value for f in state.active()] == ["link_down"]
    await asyncio.sleep(0.25)
    assert [f.spec.kind.value for f in state.active()] == ["link_down", "switch_unreachable"]
    applied = await asyncio.wait_for(task, timeout=2)
    assert [f.spec.kind.value for f in applied] == ["link_down", "switch_unreachable"]
    assert [f.spec.kind.value for f in state.active()] == ["switch_unreachable"]


async def test_a_scenario_fault_that_cannot_apply_stops_play_with_its_line(state: FabricState) -> None:
    text = "faults:\n  - {kind: link_down, switch: lf-g1-r1, id: x}\n  - {kind: link_down, switch: lf-g1-r2, id: x}\n"
    with pytest.raises(ScenarioError, match="line 3: fault id 'x' is already active"):
        await play(state, parse_scenario(text, fabric=FABRIC), speedup=100)
    with pytest.raises(ScenarioError, match="speedup"):
        await play(state, parse_scenario(text), speedup=0)


# -- scenarios ------------------------------------------------------------------------------


def test_builtin_scenarios_load_and_fit_a_small_fabric():
    assert {"all-faults", "uplink-down"} <= set(builtin_scenarios())
    scenario = load_scenario("all-faults", fabric=FABRIC)
    assert {f.spec.kind for f in scenario.faults} == set(FaultKind)
    assert scenario.duration_s >= 60 and scenario.faults[0].line == 7
    assert load_scenario("uplink-down", fabric=FABRIC).faults[0].clear_after_s == 60


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("faults:\n  - {kind: link_down, switch: lf-g1-r1}\n  - {kind: link_down, switch: nope}\n",
         "<scenario>:3: unknown switch 'nope'"),
        ("faults:\n  - kind: link_down\n    switch: lf-g1-r1\n    at_s: -1\n", "<scenario>:2: field 'at_s'"),
        ("faults:\n  - {kind: reboot, switch: ssp-1, clear_after_s: 0}\n", "'clear_after_s' must be > 0"),
        ("faults: {kind: link_down}\n", "'faults' must be a list"),
        ("fault:\n  - {kind: link_down}\n", "unknown key 'fault'"),
        ("faults: [\n", "not valid YAML"),
    ],
)  # fmt: skip
def test_scenario_errors_name_the_line(text: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=message.replace("(", r"\(")):
        parse_scenario(text, fabric=FABRIC)


def test_missing_scenario_file_lists_the_builtins(tmp_path):
    with pytest.raises(ScenarioError, match="built-in: all-faults"):
        load_scenario(tmp_path / "nope.yaml")


async def test_the_all_faults_scenario_plays_every_kind_and_clears_them() -> None:
    fabric = build_aipod(FabricParams(gpus=512))
    state = FabricState(fabric, seed=3)
    scenario = load_scenario("all-faults", fabric=fabric)
    seen: set[str] = set()

    def watch(switch: str, port: str | None) -> None:
        seen.update(str(f.spec.kind) for f in state.active())

    state.add_listener(watch)
    state.start()
    try:
        applied = await asyncio.wait_for(play(state, scenario, speedup=25.0), 30)
    finally:
        await state.stop()
    assert {str(f.spec.kind) for f in applied} == {str(k) for k in FaultKind}
    assert seen >= {"link_down", "speed_degrade", "miswire", "switch_unreachable", "reboot", "link_flap"}
    assert state.active() == []
    # Everything designed is back: every cabled port up at full speed.
    for switch in ("lf-g1-r1", "lf-g1-r4", "lf-g1-r5", "lf-g1-r7"):
        for p in state.ports(switch):
            if p.description:
                assert p.oper_up and p.speed_bps == 400 * 10**9, (switch, p.name)

"""Names are only names: a fabric whose every port and NIC is renamed is judged the same way.

A fabric, and the same fabric with every switch port and server NIC renamed by a random
bijection to vendor-like names (with ``/``, ``:``, ``.`` and ``-``), go through the same fault
scenario: the simulator's counters, the collectors' pipeline, TimescaleDB and one analyzer
evaluation. Every finding, incident, action and blast radius must be the same up to the
renaming. Data reaches the pipeline at chosen instants (:mod:`simulator.feed`), so both runs see
exactly the same samples; the protocol layers have their own tests on vendor names.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import asyncpg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.service import assess
from collector.pipeline import Pipeline
from config.model import Config
from fabric.model import Endpoint, Fabric, FabricParams, Link, Server, Switch
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState
from simulator.feed import feed_rounds
from store.db import create_pool
from store.inventory import ensure_fabric
from store.migrate import migrate
from store.pgserver import EmbeddedStore
from tests.conftest import run_sync

S = 1_000_000_000
T0 = 1_790_000_000 * S
FABRIC = build_aipod(FabricParams(gpus=256, rails=4, radix=16), "mixed")
#: Unrelated faults at once, on every tier (ports by place, so they hold under any naming).
SCENARIO: list[dict[str, Any]] = [
    {"kind": "link_down", "switch": "lf-g1-r3"},
    {"kind": "pfc_storm", "switch": "lf-g2-r2", "port_at": 10, "rate_pps": 20000},
    {"kind": "link_flap", "switch": "lf-g3-r1", "port_at": 2, "period_s": 10},
    {"kind": "error_burst", "switch": "lf-g4-r4", "port_at": 11, "rate_pps": 500},
    {"kind": "miswire", "server": "srv-g2-005", "gpu": 4, "to_leaf": "lf-g2-r2"},
    {"kind": "speed_degrade", "switch": "sp-r2-3", "speed_gbps": 200},
]
_TEMPLATES: list[Callable[[int], str]] = [
    lambda n: f"Ethernet{n // 8 + 1}/{n % 8 + 1}",
    lambda n: f"et-0/{n // 16}/{n % 16}:{n % 4}",
    lambda n: f"HundredGigE0/0/0/{n}.{n % 7}",
    lambda n: f"ethernet-1/{n + 1}-{n % 3}",
    lambda n: f"port:{n}:a/b.{n * 7 % 11}",
    lambda n: f"mlx5_{n}",
    lambda n: f"enp{n}s0f{n % 2}np{n % 2}",
]


def renaming(fabric: Fabric, rng: random.Random) -> dict[Endpoint, str]:
    """A random bijection, per node, of every switch port and server NIC to vendor-like names."""
    out: dict[Endpoint, str] = {}
    nodes: list[tuple[str, tuple[str, ...]]] = [(n, sw.port_names()) for n, sw in fabric.switches.items()]
    nodes += [(n, tuple(nic for nic, _ in s.nic_rails())) for n, s in fabric.servers.items()]
    for node, ports in nodes:
        template = rng.choice(_TEMPLATES)
        numbers = rng.sample(range(4 * len(ports) + 8), len(ports))
        names = [template(k) for k in numbers]
        if len(set(names)) < len(names):  # a template folding two numbers onto one name: number them
            names = [f"{name}#{i}" for i, name in enumerate(names)]
        out.update({Endpoint(node, p): name for p, name in zip(ports, names, strict=True)})
    return out


def renamed(fabric: Fabric, sigma: Mapping[Endpoint, str]) -> Fabric:
    """``fabric`` with every port and NIC named by ``sigma``: the same cables, the same order."""

    def end(e: Endpoint) -> Endpoint:
        return Endpoint(e.node, sigma[e])

    switches = {
        n: Switch(
            sw.name,
            sw.role,
            sw.index,
            sw.group,
            sw.rail,
            sw.plane,
            sw.radix,
            sw.speed_gbps,
            sw.mgmt_address,
            sw.nos,
            tuple(sigma[Endpoint(n, p)] for p in sw.port_names()),
        )
        for n, sw in fabric.switches.items()
    }
    servers = {
        n: Server(s.name, s.group, s.index, s.gpus, tuple((sigma[Endpoint(n, nic)], r) for nic, r in s.nic_rails()))
        for n, s in fabric.servers.items()
    }
    links = [Link(end(ln.a), end(ln.b), ln.kind, ln.rail, ln.speed_gbps) for ln in fabric.links]
    return Fabric(fabric.params, switches, servers, links)


def bound(fabric: Fabric, fault: dict[str, Any]) -> dict[str, Any]:
    """The fault with ``port_at`` replaced by the port's name in ``fabric``."""
    at = fault.get("port_at")
    if at is None:
        return dict(fault)
    return {k: v for k, v in fault.items() if k != "port_at"} | {"port": fabric.ports(fault["switch"])[at - 1].name}


async def judge(dsn: str, fabric: Fabric) -> dict[str, Any]:
    """Feed the scenario through the pipeline into a fresh database; one evaluation's report."""
    pool = await create_pool(dsn)
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
            await ensure_fabric(conn, fabric)
        clock = [T0]
        state = FabricState(fabric, seed=5, clock=lambda: clock[0])
        pipe = Pipeline(pool, fabric)
        pipe.start()
        faults = [bound(fabric, f) for f in SCENARIO]
        await feed_rounds(state, pipe, clock, rounds=8, faults=faults, step_s=10.0)
        await pipe.close()
        config = Config.model_validate({"collector": {"gnmi_interval_s": 10, "snmp_interval_s": 10}})
        async with pool.acquire() as conn:
            ev, _, report = await assess(conn, fabric, config, datetime.fromtimestamp(clock[0] / S, tz=UTC))
        found = [
            {"rule": f.rule, "key": f.key, "severity": f.severity, "scope": f.scope.as_dict()} for f in ev.all_findings
        ]
        return {"findings": found, "report": report}
    finally:
        await pool.close()


def canonical(run: Mapping[str, Any], back: Mapping[tuple[str, str], str]) -> Any:
    """What must not depend on names: every finding and incident with ports named back, sorted."""

    def port(node: str, name: str) -> str:
        return back.get((node, name), name)

    def key(k: str) -> str:
        head, _, rest = k.partition(":")
        if head in ("link",):  # incident keys: link:SWITCH:PORT
            node, _, name = rest.partition(":")
            return f"link:{node}:{port(node, name)}"
        if not rest:
            return k
        if (head, rest) in back:
            return f"{head}:{port(head, rest)}"
        name, _, prio = rest.rpartition(":")  # pfc keys: SWITCH:PORT:PRIORITY
        return f"{head}:{port(head, name)}:{prio}" if (head, name) in back else k

    def ports(values: list[str]) -> list[str]:
        return sorted(key(v) for v in values)

    findings = sorted(
        (f["rule"], key(f["key"]), f["severity"], ports(f["scope"]["ports"]), sorted(f["scope"]["servers"]),
         sorted(f["scope"]["switches"]), sorted(f["scope"]["rails"]))
        for f in run["findings"]
    )  # fmt: skip
    incidents = sorted(
        (i["rule"], i["severity"], i["recommended_action"], sorted(i["action_hosts"]), i["needs_review"],
         sorted(i["rails"]), i["gpus"], sorted(f"{m.split('|', 1)[0]}|{key(m.split('|', 1)[1])}" for m in i["members"]))
        for i in run["report"]["incidents"]
    )  # fmt: skip
    return findings, incidents


def _fresh(pg_store: EmbeddedStore) -> str:
    name = f"fm_rename_{uuid.uuid4().hex[:10]}"

    async def create() -> None:
        conn = await asyncpg.connect(pg_store.dsn("postgres"), timeout=30)
        try:
            await conn.execute(f"CREATE DATABASE {name}")
        finally:
            await conn.close()
        conn = await asyncpg.connect(pg_store.dsn(name), timeout=30)
        try:
            await conn.execute("SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS timescaledb")
        finally:
            await conn.close()

    run_sync(create())
    return pg_store.dsn(name)


def _drop(pg_store: EmbeddedStore, dsn: str) -> None:
    async def drop() -> None:
        conn = await asyncpg.connect(pg_store.dsn("postgres"), timeout=30)
        try:
            await conn.execute(f"DROP DATABASE IF EXISTS {dsn.rsplit('/', 1)[1]} WITH (FORCE)")
        finally:
            await conn.close()

    run_sync(drop())


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.randoms(use_true_random=False))
def test_every_verdict_is_the_same_up_to_the_renaming(pg_store: EmbeddedStore, rng: random.Random) -> None:
    sigma = renaming(FABRIC, rng)
    other = renamed(FABRIC, sigma)
    back = {(e.node, name): e.port for e, name in sigma.items()}
    plain_dsn, renamed_dsn = _fresh(pg_store), _fresh(pg_store)
    try:
        plain = run_sync(judge(plain_dsn, FABRIC))
        moved = run_sync(judge(renamed_dsn, other))
    finally:
        _drop(pg_store, plain_dsn)
        _drop(pg_store, renamed_dsn)
    identity = {(e.node, e.port): e.port for e in sigma}
    expected, got = canonical(plain, identity), canonical(moved, back)
    assert expected[0], "the scenario found nothing: the comparison would prove nothing"
    assert {f[0] for f in expected[0]} >= {"link_flapping", "pfc_storm", "miswire", "error_rate"}
    assert {f["key"] for f in moved["findings"]} != {f["key"] for f in plain["findings"]}, "nothing was renamed"
    assert got == expected

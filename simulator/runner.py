"""``fabricmon sim``: one process serving every simulated switch over gNMI and SNMP.

Owns everything it starts (the fabric state's timer, the gNMI server, the SNMP agent, the
control endpoint, a scenario player or a replay) and stops it all in reverse order. Which NOS
each switch imitates, and its clock, is :attr:`RunningSim.devices` (``sim.devices.nos_of(name)``).
With ``SimOptions(ledger=True)``, :attr:`RunningSim.ledger` notes every counter sample the gNMI
target wrote to a subscriber (:mod:`simulator.ledger`), the ground truth of the fault tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from fabric.inventory import load_inventory
from fabric.model import Fabric, FabricParams
from fabric.tasks import stop_task
from fabric.topology import build_aipod
from fabric.waits import wait_event
from simulator.control import create_control_app
from simulator.fabric_state import FabricState
from simulator.gnmi_server import GnmiServer, serve_gnmi
from simulator.ledger import SentLedger, check_supported
from simulator.nos import Devices, Nos, shapes_of
from simulator.replay import ReplayView
from simulator.scenario import Scenario, load_scenario, play
from simulator.sim_config import Protocols, sim_config, write_sim_config
from simulator.sim_tls import SimTls, prepare, server_names
from simulator.snmp_agent import SnmpAgent, serve_snmp
from simulator.view import FabricView

log = logging.getLogger(__name__)


def split_hostport(value: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` → (host, port)."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected host:port, got {value!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


@dataclass(frozen=True, slots=True)
class SimOptions:
    """What ``fabricmon sim`` was asked to do."""

    params: FabricParams | None = None
    inventory: Path | None = None
    gnmi: str | None = "127.0.0.1:9339"
    snmp: str | None = "127.0.0.1:1161"
    control: str | None = "127.0.0.1:9340"
    scenario: str | None = None
    replay: Path | None = None
    speedup: float = 1.0
    seed: int = 0
    write_config: Path | None = None
    protocols: Protocols = "mixed"
    #: Serve SNMPv3 too (a pysnmp engine); tests that only need v2c leave it off.
    snmp_v3: bool = True
    duration_s: float | None = None
    #: Notification shapes, assigned to the switches round-robin in fabric order (SPEC §9.2); a
    #: switch whose inventory names its NOS speaks that NOS's shape instead.
    nos: tuple[Nos, ...] = (Nos.OPENCONFIG,)
    #: Port names of a generated fabric (:mod:`fabric.naming`): ``swp``, a NOS's, or ``mixed``.
    naming: str = "swp"
    #: Each switch's clock is off by a fixed amount in ±this (seeded); and per-Notification noise.
    clock_skew_s: float = 0.0
    clock_jitter_ms: float = 0.0
    #: Keep the sent-ledger (:mod:`simulator.ledger`); only for the NOS shapes it decodes.
    ledger: bool = False
    #: Serve gNMI over TLS with the CA and server certificate kept here (:mod:`simulator.sim_tls`);
    #: None: plaintext. ``fabricmon sim`` sets it unless ``--plaintext``; in-process tests leave it.
    tls_dir: Path | None = None
    #: Names the server certificate carries besides the listen host and the local ones.
    tls_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.ledger:
            check_supported(self.nos)


@dataclass(frozen=True, slots=True)
class SimEndpoints:
    """Where a running simulator listens, and what its switches speak: all a config needs."""

    fabric: Fabric
    gnmi: str | None
    snmp: str | None
    control: str | None
    nos: Mapping[str, Nos]
    ca_file: Path | None


@dataclass(slots=True)
class RunningSim:
    """What is up, and where (ports are the bound ones: 0 in the options means any free port)."""

    view: FabricView
    state: FabricState | None
    fabric: Fabric | None
    devices: Devices | None = None
    gnmi: GnmiServer | None = None
    snmp: SnmpAgent | None = None
    control: web.AppRunner | None = None
    control_port: int | None = None
    control_sock: socket.socket | None = None
    scenario: Scenario | None = None
    scenario_task: asyncio.Task[Any] | None = None
    #: The counter samples written to gNMI subscribers (None unless ``SimOptions.ledger``).
    ledger: SentLedger | None = None
    #: The TLS files gNMI is served with (None: plaintext).
    tls: SimTls | None = None
    started: float = field(default_factory=time.monotonic)

    def addresses(self, opts: SimOptions) -> dict[str, str | None]:
        def where(given: str | None, port: int | None) -> str | None:
            return None if given is None or port is None else f"{split_hostport(given)[0]}:{port}"

        return {
            "gnmi": where(opts.gnmi, self.gnmi.port if self.gnmi else None),
            "snmp": where(opts.snmp, self.snmp.port if self.snmp else None),
            "control": where(opts.control, self.control_port),
        }

    def endpoints(self, opts: SimOptions) -> SimEndpoints:
        """Where it listens (``opts``: the host part of each address it was asked for)."""
        if self.fabric is None:
            raise ValueError("a replayed simulator has no fabric to configure")
        addr = self.addresses(opts)
        return SimEndpoints(self.fabric, addr["gnmi"], addr["snmp"], addr["control"],
                            self.devices.assignment() if self.devices is not None else {},
                            self.tls.ca_file if self.tls is not None else None)  # fmt: skip


async def start_sim(opts: SimOptions) -> RunningSim:
    """Build the view and start every front-end; on failure, stop what had started."""
    sim = _build(opts)
    sim.ledger = SentLedger() if opts.ledger else None
    sim.devices = Devices(
        sim.view.switch_names(),
        opts.nos,
        assigned=shapes_of(sim.fabric) if sim.fabric is not None else None,
        clock_skew_s=opts.clock_skew_s,
        clock_jitter_ms=opts.clock_jitter_ms,
        seed=opts.seed,
    )
    try:
        if opts.gnmi is not None:
            host, port = split_hostport(opts.gnmi)
            if opts.tls_dir is not None:
                sim.tls = prepare(opts.tls_dir, server_names(host, opts.tls_names))
            tls = sim.tls.server if sim.tls is not None else None
            sim.gnmi = await serve_gnmi(sim.view, host, port, tls=tls, devices=sim.devices, ledger=sim.ledger)
        if opts.snmp is not None:
            host, port = split_hostport(opts.snmp)
            if opts.snmp_v3:
                sim.snmp = await serve_snmp(sim.view, host, port)
            else:
                sim.snmp = await serve_snmp(sim.view, host, port, v3_users=())
        if sim.state is not None:
            sim.state.start()
            if opts.control is not None:
                host, port = split_hostport(opts.control)
                sock = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
                sim.control_port = int(sock.getsockname()[1])
                sim.control_sock = sock
                sim.control = web.AppRunner(create_control_app(sim.state), access_log=None)
                await sim.control.setup()
                await web.SockSite(sim.control, sock).start()
            if sim.scenario is not None:
                sim.scenario_task = asyncio.create_task(play(sim.state, sim.scenario, opts.speedup), name="scenario")
        elif isinstance(sim.view, ReplayView):
            sim.view.start()
        if opts.write_config is not None:
            addr = sim.addresses(opts)
            write_sim_config(
                opts.write_config,
                sim_config(
                    gnmi_address=addr["gnmi"],
                    snmp_address=addr["snmp"],
                    protocols=opts.protocols,
                    params=sim.fabric.params if sim.fabric is not None and opts.inventory is None else None,
                    inventory=opts.inventory,
                    fabric=sim.fabric,
                    naming=opts.naming,
                    nos=sim.devices.assignment(),
                    ca_file=sim.tls.ca_file if sim.tls is not None else None,
                ),
            )
    except BaseException:
        await stop_sim(sim)
        raise
    return sim


def build_fabric(opts: SimOptions) -> Fabric:
    """The fabric the options simulate: the inventory's, or a generated AIPod (a pure function)."""
    if opts.inventory is not None:
        return load_inventory(opts.inventory)
    return build_aipod(opts.params or FabricParams(gpus=512), opts.naming)


def _build(opts: SimOptions) -> RunningSim:
    if opts.replay is not None:
        return RunningSim(view=ReplayView(opts.replay, speedup=opts.speedup), state=None, fabric=None)
    fabric = build_fabric(opts)
    scenario = load_scenario(opts.scenario, fabric=fabric) if opts.scenario else None
    state = FabricState(fabric, seed=opts.seed)
    return RunningSim(view=state, state=state, fabric=fabric, scenario=scenario)


async def stop_sim(sim: RunningSim) -> None:
    """Stop everything, newest first; never raises."""
    await stop_task(sim.scenario_task, "the scenario", log)
    if sim.control is not None:
        with contextlib.suppress(Exception):
            await sim.control.cleanup()
    if sim.control_sock is not None:
        sim.control_sock.close()  # aiohttp's SockSite does not close a socket it was given
    if sim.snmp is not None:
        with contextlib.suppress(Exception):
            await sim.snmp.stop()
    if sim.gnmi is not None:
        with contextlib.suppress(Exception):
            await sim.gnmi.stop()
    if sim.state is not None:
        with contextlib.suppress(Exception):
            await sim.state.stop()
    if isinstance(sim.view, ReplayView):
        await sim.view.stop()


async def run_sim(opts: SimOptions, ready: Callable[[RunningSim], None], stop: asyncio.Event) -> RunningSim:
    """Start, report readiness, serve until ``stop`` is set or the duration passes, then stop."""
    sim = await start_sim(opts)
    try:
        ready(sim)
        if opts.duration_s is None:
            await stop.wait()
        else:
            await wait_event(stop, opts.duration_s)
    finally:
        await stop_sim(sim)
    return sim

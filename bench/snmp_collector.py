"""SNMP collection speed: varbinds per CPU-second of our collector against net-snmp's snmpbulkwalk.

The agents are ``fabricmon sim`` in a subprocess (its CPU is not ours); the switches are the
spines and superspines of a 16,384-GPU fabric (384 switches at radix 128), as the simulator's
``--write-config`` assigns SNMP to them. Three clients read the same tables:

* ``gufo``: our collector as deployed (gufo-snmp codec), every switch, a cold round (index
  tables, column probes) then a steady-state round, each timed on this process's CPU.
* ``pysnmp``: our collector with the pysnmp codec, a subset of switches (it is slow).
* ``snmpbulkwalk``: net-snmp 5.9's C tool, ``-Cr50``, one process per table and switch,
  timed on the children's CPU (process start-up included: that is how it is used).

``python -m bench.snmp_collector [--gpus N] [--subset K]`` runs it alone and prints JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import shutil
import sys
import time
from collections.abc import Sequence
from typing import Any

from pydantic import SecretStr

from bench.simproc import simulator
from collector.snmp import open_poller
from collector.snmp_client import Backend
from collector.snmp_poll import SwitchPoller
from collector.snmp_pysnmp import PysnmpEngines
from collector.targets import SwitchTarget
from fabric.model import FabricParams
from fabric.topology import build_aipod

#: What one poll walks, as subtrees for snmpbulkwalk (it walks every column of each).
WALKS = (
    "1.3.6.1.2.1.31.1.1.1",  # ifXTable
    "1.3.6.1.2.1.2.2.1",  # ifTable
    "1.3.6.1.4.1.9.9.813.1.2.1",  # cpfcIfPriorityTable
    "1.0.8802.1.1.2.1.4.1.1",  # lldpRemTable
)


def _cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


async def _round(pollers: Sequence[SwitchPoller], concurrency: int) -> dict[str, float | None]:
    limiter = asyncio.Semaphore(concurrency)
    varbinds = sum(p.client.varbinds for p in pollers)
    requests = sum(p.client.requests for p in pollers)
    cpu, wall = _cpu_self(), time.perf_counter()
    results = await asyncio.gather(*(p.poll(limiter) for p in pollers))
    cpu, wall = _cpu_self() - cpu, time.perf_counter() - wall
    varbinds = sum(p.client.varbinds for p in pollers) - varbinds
    return {
        "switches": len(pollers),
        "varbinds": varbinds,
        "requests": sum(p.client.requests for p in pollers) - requests,
        "readings": sum(len(r.ports) for r in results),
        "cpu_s": round(cpu, 3),
        "wall_s": round(wall, 3),
        "varbinds_per_cpu_s": round(varbinds / cpu) if cpu else None,
        "varbinds_per_s": round(varbinds / wall) if wall else None,
    }


async def collector(address: str, switches: Sequence[str], backend: Backend, concurrency: int = 64) -> dict[str, Any]:
    """Two rounds (cold, then steady) of our collector over ``switches``."""
    engines = PysnmpEngines()
    invalid: list[int] = [0]

    def count(what: str, n: int) -> None:
        invalid[0] += n

    targets = [SwitchTarget(s, "snmp", address, community=SecretStr(s), timeout_s=3, retries=2) for s in switches]
    pollers = [open_poller(t, engines, 60.0, count, backend) for t in targets]
    try:
        cold = await _round(pollers, concurrency)
        steady = await _round(pollers, concurrency)
    finally:
        for p in pollers:
            await p.client.close()
        engines.close()
    return {"backend": pollers[0].client.backend, "cold": cold, "steady": steady, "invalid": invalid[0]}


async def snmpbulkwalk(address: str, switches: Sequence[str], parallel: int = 4) -> dict[str, Any] | None:
    """net-snmp's snmpbulkwalk over the same tables; CPU of the child processes."""
    tool = shutil.which("snmpbulkwalk")
    if tool is None:
        return None
    limiter = asyncio.Semaphore(parallel)
    lines = 0

    async def walk(switch: str, oid: str) -> None:
        nonlocal lines
        async with limiter:
            proc = await asyncio.create_subprocess_exec(
                tool, "-v2c", "-c", switch, "-Cr50", "-On", "-Oq", "-m", "", "-t", "10", "-r", "1", address, oid,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
            )  # fmt: skip
            out, _ = await proc.communicate()
            lines += out.count(b"\n")

    cpu, wall = _cpu_children(), time.perf_counter()
    await asyncio.gather(*(walk(s, oid) for s in switches for oid in WALKS))
    cpu, wall = _cpu_children() - cpu, time.perf_counter() - wall
    return {
        "switches": len(switches),
        "processes": len(switches) * len(WALKS),
        "varbinds": lines,
        "cpu_s": round(cpu, 3),
        "wall_s": round(wall, 3),
        "varbinds_per_cpu_s": round(lines / cpu) if cpu else None,
    }


def snmp_switches(gpus: int) -> list[str]:
    """The switches the simulator's config polls over SNMP: spines and superspines."""
    fabric = build_aipod(FabricParams(gpus=gpus))
    return sorted(n for n in fabric.switches if n.startswith(("sp-", "ssp-")))


async def measure(gpus: int = 16384, subset: int = 24) -> dict[str, Any]:
    """The whole comparison; the simulator is started and stopped here."""
    switches = snmp_switches(gpus)
    few = switches[:: max(1, len(switches) // subset)][:subset]
    async with simulator("--gpus", str(gpus), "--gnmi", "", "--snmp", "127.0.0.1:0", "--control", "") as (_, ready):
        address = str(ready["snmp"])
        ours = await collector(address, switches, "auto")
        print(f"bench snmp: gufo {ours['steady']}", file=sys.stderr, flush=True)
        ours_few = await collector(address, few, "auto")
        slow = await collector(address, few, "pysnmp")
        print(f"bench snmp: pysnmp {slow['steady']}", file=sys.stderr, flush=True)
        net_snmp = await snmpbulkwalk(address, few)
        print(f"bench snmp: snmpbulkwalk {net_snmp}", file=sys.stderr, flush=True)
    goal = 50_000
    rate = ours["steady"]["varbinds_per_cpu_s"]
    return {
        "gpus": gpus,
        "switches": len(switches),
        "gufo_all_switches": ours,
        "subset": {"switches": len(few), "gufo": ours_few, "pysnmp": slow, "snmpbulkwalk": net_snmp},
        "goal_varbinds_per_cpu_s": goal,
        "goal_met": bool(rate and rate >= goal),
    }


async def run(dsn: str) -> dict[str, Any]:
    """``make bench`` entry point (the store is not used)."""
    return await measure()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.snmp_collector")
    parser.add_argument("--gpus", type=int, default=16384)
    parser.add_argument("--subset", type=int, default=24)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.gpus, args.subset)), indent=2))


if __name__ == "__main__":
    main()

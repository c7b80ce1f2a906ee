"""``fabricmon inventory discover`` on a 16,384-GPU fabric: how long from the first request to the inventory.

The simulator (``fabricmon sim --gpus 16384 --naming mixed``, a child process with its own CPU)
serves 640 switches of seven NOS namings, leaves over gNMI (the shape of each NOS) and spines and
superspines over SNMP, as its ``--write-config`` splits them. Discovery then runs here, in this
process, as the command does: from one seed leaf (and the exact names the config lists) it
crawls the fabric, reads every switch's LLDP table, builds the cable graph, decides roles, rails
and groups, judges the design and writes the version 2 inventory. Timed: the crawl, the
build, the write, and the total (wall and this process's CPU); checked: the inventory is the
fabric's cabling plan (every cable, role, leaf rail and server group).

Goal: the total under 60 s. ``python -m bench.discover_16k [--gpus N] [--concurrency K]``
runs it alone and prints JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.simproc import simulator
from config.loader import load_config
from discovery.build import build
from discovery.run import Crawl, CrawlOptions
from discovery.seeds import Targets, seed_names
from fabric.inventory import write_inventory
from fabric.model import Fabric, FabricParams, Role
from fabric.topology import build_aipod

GOAL_S = 60.0


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _progress(done: int, scheduled: int, failed: int) -> None:
    if done % 100 == 0 or done == scheduled:
        print(f"bench discover: polled {done}/{scheduled} switches ({failed} failed)", file=sys.stderr, flush=True)


def _same_plan(found: Fabric | None, truth: Fabric) -> dict[str, bool]:
    if found is None:
        return {"cables": False, "roles": False, "leaf_rails": False, "groups": False}

    def pairs(f: Fabric) -> set[frozenset[tuple[str, str]]]:
        return {frozenset({(ln.a.node, ln.a.port), (ln.b.node, ln.b.port)}) for ln in f.links}

    def groups(f: Fabric) -> set[frozenset[str]]:
        by: dict[int, set[str]] = {}
        for s in f.servers.values():
            by.setdefault(s.group, set()).add(s.name)
        return {frozenset(v) for v in by.values()}

    leaves = [n for n, sw in truth.switches.items() if sw.role is Role.LEAF]
    return {
        "cables": pairs(found) == pairs(truth),
        "roles": {n: s.role for n, s in found.switches.items()} == {n: s.role for n, s in truth.switches.items()},
        "leaf_rails": all(n in found.switches and found.switches[n].rail == truth.switches[n].rail for n in leaves),
        "groups": groups(found) == groups(truth),
    }


async def measure(gpus: int = 16384, concurrency: int = 64) -> dict[str, Any]:
    """Start the simulator, discover its fabric, check and time it."""
    truth = build_aipod(FabricParams(gpus=gpus), naming="mixed")
    with tempfile.TemporaryDirectory(prefix="fabricmon-discover-") as tmp:
        config_path, out = Path(tmp) / "sim.yaml", Path(tmp) / "found.yaml"
        sim_args = ("--gpus", str(gpus), "--naming", "mixed", "--gnmi", "127.0.0.1:0", "--snmp", "127.0.0.1:0",
                    "--control", "", "--write-config", str(config_path))  # fmt: skip
        started = time.perf_counter()
        async with simulator(*sim_args):
            sim_ready_s = time.perf_counter() - started
            print(f"bench discover: simulator up in {sim_ready_s:.1f} s", file=sys.stderr, flush=True)
            config = load_config(config_path)
            seeds = seed_names(config.targets, [], ["lf-g1-r1"])
            crawl = Crawl(Targets(config.targets), CrawlOptions(concurrency=concurrency), progress=_progress)
            cpu, t0 = _cpu(), time.perf_counter()
            result = await crawl.run(seeds)
            t1 = time.perf_counter()
        report = build(result, {})
        t2 = time.perf_counter()
        if report.fabric is not None:
            write_inventory(report.fabric, out)
        t3 = time.perf_counter()
        cpu = _cpu() - cpu
    total = t3 - t0
    return {
        "gpus": gpus,
        "switches": len(truth.switches),
        "seeds": len(seeds),
        "concurrency": concurrency,
        "answered": len(result.tables),
        "failed": len(result.failed),
        "crawl_s": round(t1 - t0, 2),
        "build_s": round(t2 - t1, 2),
        "write_s": round(t3 - t2, 2),
        "total_s": round(total, 2),
        "cpu_s": round(cpu, 2),
        "simulator_start_s": round(sim_ready_s, 1),
        "clean": report.clean,
        "same_plan": _same_plan(report.fabric, truth),
        "goal_s": GOAL_S,
        "goal_met": total < GOAL_S and report.clean,
    }


async def run(dsn: str) -> dict[str, Any]:
    """``make bench`` entry point (the store is not used)."""
    return await measure()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.discover_16k")
    parser.add_argument("--gpus", type=int, default=16384)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.gpus, args.concurrency)), indent=2))


if __name__ == "__main__":
    main()

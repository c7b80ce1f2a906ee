"""The simulator at 16,384 GPUs: start time, memory, sustained gNMI and SNMP service.

Goal (issue 3): one sim process serves the whole fabric (640 switches, ~82K ports) over gNMI at
10 s sampling on this 2-core machine, and its SNMP agent outruns the collector.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from typing import Any

from bench.simproc import simulator
from fabric.model import FabricParams
from fabric.topology import build_aipod

GPUS = int(os.environ.get("FABRICMON_BENCH_GPUS", "16384"))
WINDOW_S = float(os.environ.get("FABRICMON_BENCH_WINDOW_S", "60"))
_TICK = os.sysconf("SC_CLK_TCK")


def _proc_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def _snmp_walk_rate(address: str, switches: list[str]) -> dict[str, Any]:
    """net-snmp bulkwalks of the whole ifXTable of spines and superspines, 4 at a time."""
    sem = asyncio.Semaphore(4)
    total = 0

    async def walk(sw: str) -> None:
        nonlocal total
        async with sem:
            proc = await asyncio.create_subprocess_exec(
                "snmpbulkwalk",
                "-v2c",
                "-c",
                sw,
                "-Cr50",
                "-On",
                "-Oq",
                "-t",
                "5",
                address,
                "1.3.6.1.2.1.31.1.1",
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            out, _ = await proc.communicate()
            total += out.count(b"\n")

    started = time.monotonic()
    await asyncio.gather(*(walk(s) for s in switches))
    elapsed = time.monotonic() - started
    return {
        "switches": len(switches),
        "varbinds": total,
        "seconds": round(elapsed, 2),
        "varbinds_per_s": round(total / elapsed),
    }


async def run(dsn: str) -> dict[str, Any]:
    del dsn
    fabric = build_aipod(FabricParams(gpus=GPUS))
    started = time.monotonic()
    sim_args = ("--gpus", str(GPUS), "--gnmi", "127.0.0.1:0", "--snmp", "127.0.0.1:0", "--control", "")
    async with simulator(*sim_args, "--plaintext") as (  # the simulator's own cost, as before TLS was its default
        sim,
        ready,
    ):
        start_s = time.monotonic() - started
        rss_idle = _rss_mb(sim.pid)
        switches = sorted(fabric.switches)
        cpu0 = _proc_cpu(sim.pid)
        consumer = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.gnmi_consumer",
            ready["gnmi"],
            "--switches",
            ",".join(switches),
            "--seconds",
            str(WINDOW_S),
            "--interval",
            "10",
            stdout=subprocess.PIPE,
        )
        out, _ = await consumer.communicate()
        gnmi = json.loads(out)
        sim_cpu = _proc_cpu(sim.pid) - cpu0
        rss_streaming = _rss_mb(sim.pid)
        expected = sum(1 for p in fabric.all_ports()) * 15 / 10  # 15 counter leaves per port every 10 s
        snmp_switches = [s for s in switches if not s.startswith("lf-")]
        cpu1 = _proc_cpu(sim.pid)
        snmp = await _snmp_walk_rate(ready["snmp"], snmp_switches)
        snmp["agent_cpu_s"] = round(_proc_cpu(sim.pid) - cpu1, 2)
        snmp["varbinds_per_agent_cpu_s"] = round(snmp["varbinds"] / max(snmp["agent_cpu_s"], 1e-9))
        return {
            "gpus": GPUS,
            "switches": len(switches),
            "start_s": round(start_s, 2),
            "rss_mb_idle": round(rss_idle),
            "rss_mb_streaming": round(rss_streaming),
            "gnmi": {**gnmi, "expected_values_per_s": round(expected), "sim_cpu_s_incl_first_dump": round(sim_cpu, 2)},
            "snmp": snmp,
        }

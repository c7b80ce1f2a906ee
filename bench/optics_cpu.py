"""What collecting link health costs the gNMI collector: CPU per switch with and without the optics paths.

``fabricmon sim --gpus N --nos openconfig,sonic --write-config`` serves every switch (half of them
OpenConfig, half SONiC); ``fabricmon collect`` (the real command, its own process) streams them
into the benchmark's private store at the default intervals (counters every
``collector.gnmi_interval_s`` = 10 s, FEC every ``collector.fec_interval_s`` and DOM every
``collector.dom_interval_s`` = 60 s, the modules' thresholds every
``collector.thresholds_interval_s`` = 600 s), twice:

* ``without``: the built-in profiles with their ``optics`` section removed (what the collector
  subscribed to before issue 26): counters, PFC, status and LLDP;
* ``with``: the built-in profiles as shipped: one more Subscribe stream per switch (FEC, DOM and
  thresholds on OpenConfig; DOM and thresholds on SONiC, whose FEC is cut from the COUNTERS hash
  the counters' stream receives) and the ``port_fec`` / ``transceiver_dom`` writers.

The two collectors run **side by side**, at once, against the same simulator, each into its own
database of the benchmark's store: whatever else loads the machine, or however the simulator's
timing drifts, weighs on both in the same window. Run one after the other (:func:`alternate`, the
method until 2026-12-06), single runs of one variant differed by 15 % on a quiet machine and by
up to 60 % on a busy one, more than the effect measured. Both wait for every switch to connect,
let a DOM interval pass, then their CPU-seconds (``/proc``, every thread) are read over
``windows`` consecutive windows. A window is one thresholds interval (600 s) by default: the
optics' work comes in bursts (DOM and FEC each minute, thresholds each ten), so a 120 s window
held a thresholds burst or not; three runs of the same code with 120 s windows gave medians of
+18.1, +10.1 and +10.5 %. The
result is CPU per switch (milli-cores) for each, per window, and the median of the windows'
increases (goal: <= 10 %). Environment: ``FABRICMON_BENCH_OPTICS_GPUS`` (1,024: the issue's
fabric, 40 switches; until 2026-12-07 it was 512, 20 switches), ``..._WINDOW_S``
(600), ``..._WINDOWS`` (2), ``..._NOS`` (``openconfig,sonic``: half of the switches each),
``..._PIN`` (1).

The simulator stands in for the switches, which never run on the collector's machine: it is
pinned to a core of its own and both collectors to the others (``..._PIN=0``: every process on
every core, the method until 2026-12-07). Unpinned, it renders each minute's FEC and DOM on the
collectors' cores at the very instant the with-collector decodes them, and the contention is
charged to the optics: +13.2 % unpinned against +6.5 % pinned for the same code, while the
instructions the optics add (callgrind) are +4.6 % (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench.collect_e2e import _complete_metrics, _cpu_s, _free_port, _Shard, _until_connected, _until_schema
from bench.simproc import simulator
from collector.profiles import PROFILE_DIR
from store.db import recreate_database

GPUS = int(os.environ.get("FABRICMON_BENCH_OPTICS_GPUS", "1024"))  # issue 26's goals: a 1,024-GPU fabric
WINDOW_S = float(os.environ.get("FABRICMON_BENCH_OPTICS_WINDOW_S", "600"))  # collector.thresholds_interval_s
WINDOWS = int(os.environ.get("FABRICMON_BENCH_OPTICS_WINDOWS", "2"))
NOS = os.environ.get("FABRICMON_BENCH_OPTICS_NOS", "openconfig,sonic")
INTERVAL_S = 10.0  # the defaults: collector.gnmi_interval_s ...
DOM_INTERVAL_S = 60.0  # ... and collector.dom_interval_s
GOAL_INCREASE = 0.10
#: The simulator on a core of its own, the collectors on the others (0: all share every core).
PIN = os.environ.get("FABRICMON_BENCH_OPTICS_PIN", "1") != "0"


def _without_optics(config: Path, tmp: Path) -> Path:
    """The simulator's config, each gNMI target's profile replaced by a copy without ``optics``."""
    data = yaml.safe_load(config.read_text())
    for target in data.get("targets", []):
        if target.get("protocol") != "gnmi":
            continue
        name = target.get("profile") or "openconfig"
        doc = yaml.safe_load((PROFILE_DIR / f"{name}.yaml").read_text())
        doc.pop("optics", None)
        copy = tmp / f"{name}-no-optics.yaml"
        copy.write_text(yaml.safe_dump(doc))
        target["profile"] = str(copy)
    out = tmp / "fabricmon-no-optics.yaml"
    out.write_text(yaml.safe_dump(data))
    return out


def _collect(dsn: str, config: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``fabricmon collect`` (its own process) into ``dsn``; the process and its metrics URL."""
    at = f"127.0.0.1:{_free_port()}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "collect", "--config", str(config), "--metrics-listen", at],
        env={**os.environ, "FABRICMON_DATABASE__DSN": dsn},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return proc, f"http://{at}/metrics"


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def _one(
    dsn: str, config: Path, settle_s: float = DOM_INTERVAL_S + INTERVAL_S, window_s: float = WINDOW_S
) -> dict[str, Any]:
    """One ``fabricmon collect`` run against the running simulator: its CPU over ``window_s``,
    after ``settle_s`` (past the first dumps and a DOM sample)."""
    proc, url = _collect(dsn, config)
    try:
        switches = await _until_schema(dsn)
        await _until_connected([_Shard(proc, url)], switches)
        await asyncio.sleep(settle_s)
        m0 = await _complete_metrics(url)
        cpu0, t0 = _cpu_s(proc.pid), time.monotonic()
        await asyncio.sleep(window_s)
        m1 = await _complete_metrics(url)
        cpu, wall = _cpu_s(proc.pid) - cpu0, time.monotonic() - t0
    finally:
        _stop(proc)

    def rate(table: str) -> float:
        name = f'fabricmon_writer_rows_total{{outcome="written",table="{table}"}}'
        return round((m1.get(name, 0.0) - m0.get(name, 0.0)) / wall, 1)

    return {
        "switches": switches,
        "cpu_s": round(cpu, 2),
        "window_s": round(wall, 1),
        "millicores_per_switch": round(1000 * cpu / wall / switches, 3),
        "port_rows_per_s": rate("port_counters"),
        "fec_rows_per_s": rate("port_fec"),
        "dom_rows_per_s": rate("transceiver_dom"),
    }


async def alternate(
    dsn: str, without: Path, with_: Path, rounds: int, bench: str, what: str, **one: float
) -> tuple[float, float, dict[str, list[dict[str, Any]]]]:
    """``rounds`` alternating :func:`_one` runs of each config: the medians of their millicores
    per switch (without, with) and the runs. ``one``: :func:`_one`'s settle and window."""
    runs: dict[str, list[dict[str, Any]]] = {"without": [], "with": []}
    for i in range(rounds):
        for variant, path in (("without", without), ("with", with_)):
            print(f"bench: {bench} round {i + 1}/{rounds}, {variant} {what}", file=sys.stderr, flush=True)
            runs[variant].append(await _one(dsn, path, **one))
    medians = [statistics.median(r["millicores_per_switch"] for r in runs[v]) for v in ("without", "with")]
    return medians[0], medians[1], runs


async def side_by_side(
    dsns: dict[str, str], configs: dict[str, Path], windows: int = WINDOWS, window_s: float = WINDOW_S
) -> list[dict[str, Any]]:
    """One ``fabricmon collect`` per variant (``dsns`` and ``configs`` by variant name), all at
    once against the running simulator; per window, each variant's millicores per switch."""
    procs = {v: _collect(dsns[v], configs[v]) for v in dsns}
    try:
        switches = {v: await _until_schema(dsns[v]) for v in dsns}
        for v, (proc, url) in procs.items():
            await _until_connected([_Shard(proc, url)], switches[v])
        await asyncio.sleep(DOM_INTERVAL_S + INTERVAL_S)  # past the first dumps and a DOM sample
        out: list[dict[str, Any]] = []
        for i in range(windows):
            print(f"bench: optics_cpu window {i + 1}/{windows} ({window_s:.0f} s)", file=sys.stderr, flush=True)
            cpu0 = {v: _cpu_s(p.pid) for v, (p, _) in procs.items()}
            t0 = time.monotonic()
            await asyncio.sleep(window_s)
            wall = time.monotonic() - t0
            cpu = {v: _cpu_s(p.pid) - cpu0[v] for v, (p, _) in procs.items()}
            out.append({v: round(1000 * cpu[v] / wall / switches[v], 3) for v in procs})
        return out
    finally:
        for proc, _ in procs.values():
            _stop(proc)


async def run(dsn: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="fabricmon-bench-optics-") as name:
        tmp = Path(name)
        config = tmp / "fabricmon.yaml"
        args = ["--gpus", str(GPUS), "--gnmi", "127.0.0.1:0", "--snmp", "", "--control", "", "--plaintext"]
        args += ["--nos", NOS, "--protocols", "gnmi", "--write-config", str(config)]
        other = dsn.rsplit("/", 1)[0] + "/fabricmon_bench_optics"
        await recreate_database(dsn, "fabricmon_bench_optics")
        cpus = sorted(os.sched_getaffinity(0))
        pinned = PIN and len(cpus) >= 2
        try:
            if pinned:  # the switches' stand-in on a core of its own (what is spawned from here inherits it)
                os.sched_setaffinity(0, cpus[:1])
            async with simulator(*args):
                if pinned:  # the collectors, spawned from here, on the others
                    os.sched_setaffinity(0, cpus[1:])
                plain = _without_optics(config, tmp)
                runs = await side_by_side({"without": dsn, "with": other}, {"without": plain, "with": config})
        finally:
            os.sched_setaffinity(0, cpus)
    increases = [r["with"] / r["without"] - 1 for r in runs if r["without"]]
    increase = statistics.median(increases) if increases else float("nan")
    return {
        "gpus": GPUS,
        "nos": NOS,
        "interval_s": INTERVAL_S,
        "dom_interval_s": DOM_INTERVAL_S,
        "window_s": WINDOW_S,
        "method": "side by side: both collectors at once, each into its own database"
        + ("; the simulator pinned to one core, the collectors to the others" if pinned else ""),
        "pinned": pinned,
        "millicores_per_switch_without": statistics.median(r["without"] for r in runs),
        "millicores_per_switch_with": statistics.median(r["with"] for r in runs),
        "increase_per_window": [round(x, 3) for x in increases],
        "increase": round(increase, 3),
        "goal_increase": GOAL_INCREASE,
        "meets_goal": increase <= GOAL_INCREASE,
        "runs": runs,
    }

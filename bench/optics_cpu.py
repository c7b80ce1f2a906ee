"""What collecting link health costs the gNMI collector: CPU per switch with and without the optics paths.

``fabricmon sim --gpus N --nos openconfig,sonic --write-config`` serves every switch (half of them
OpenConfig, half SONiC); ``fabricmon collect`` (the real command, its own process) streams them
into the benchmark's private store at the default intervals (counters every
``collector.gnmi_interval_s`` = 10 s, DOM every ``collector.dom_interval_s`` = 60 s), twice:

* ``without``: the built-in profiles with their ``optics`` section removed (what the collector
  subscribed to before issue 26): counters, PFC, status and LLDP;
* ``with``: the built-in profiles as shipped, adding one more Subscribe stream per switch
  (SONiC: two) for FEC at 10 s and DOM at 60 s, and the ``port_fec`` / ``transceiver_dom``
  writers.

Each run waits for every switch to connect, lets a DOM interval pass, then measures the collector's
CPU-seconds (``/proc``, every thread) over a window of whole DOM intervals. The result is CPU per
switch (milli-cores) for each, and the increase (goal: <= 10 %). The runs alternate ``rounds``
times, and the median per variant is reported, as other helpers may share the cores.
Environment: ``FABRICMON_BENCH_OPTICS_GPUS`` (512), ``..._WINDOW_S`` (120), ``..._ROUNDS`` (1).
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

GPUS = int(os.environ.get("FABRICMON_BENCH_OPTICS_GPUS", "512"))
WINDOW_S = float(os.environ.get("FABRICMON_BENCH_OPTICS_WINDOW_S", "120"))
ROUNDS = int(os.environ.get("FABRICMON_BENCH_OPTICS_ROUNDS", "1"))
INTERVAL_S = 10.0  # the defaults: collector.gnmi_interval_s ...
DOM_INTERVAL_S = 60.0  # ... and collector.dom_interval_s
GOAL_INCREASE = 0.10


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


async def _one(
    dsn: str, config: Path, settle_s: float = DOM_INTERVAL_S + INTERVAL_S, window_s: float = WINDOW_S
) -> dict[str, Any]:
    """One ``fabricmon collect`` run against the running simulator: its CPU over ``window_s``,
    after ``settle_s`` (past the first dumps and a DOM sample)."""
    at = f"127.0.0.1:{_free_port()}"
    env = {**os.environ, "FABRICMON_DATABASE__DSN": dsn}
    proc = subprocess.Popen(  # noqa: ASYNC220 - polled and signalled by pid
        [sys.executable, "-m", "cli.main", "collect", "--config", str(config), "--metrics-listen", at],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://{at}/metrics"
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
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

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


async def run(dsn: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="fabricmon-bench-optics-") as name:
        tmp = Path(name)
        config = tmp / "fabricmon.yaml"
        args = ["--gpus", str(GPUS), "--gnmi", "127.0.0.1:0", "--snmp", "", "--control", "", "--plaintext"]
        args += ["--nos", "openconfig,sonic", "--protocols", "gnmi", "--write-config", str(config)]
        async with simulator(*args):
            plain = _without_optics(config, tmp)
            without, with_, runs = await alternate(dsn, plain, config, ROUNDS, "optics_cpu", "optics")
    increase = with_ / without - 1 if without else float("nan")
    return {
        "gpus": GPUS,
        "interval_s": INTERVAL_S,
        "dom_interval_s": DOM_INTERVAL_S,
        "window_s": WINDOW_S,
        "rounds": ROUNDS,
        "millicores_per_switch_without": without,
        "millicores_per_switch_with": with_,
        "increase": round(increase, 3),
        "goal_increase": GOAL_INCREASE,
        "meets_goal": increase <= GOAL_INCREASE,
        "runs": runs,
    }

"""gNMI end to end at 16,384 GPUs: simulator → ``fabricmon collect`` → TimescaleDB, as users run it.

``fabricmon sim --gpus N --protocols gnmi --write-config`` serves every switch; ``fabricmon
collect`` (the real command, its own process) streams all of them at the config's 10 s interval
into the benchmark's private store. Once every target is connected and one full interval has
passed, a window of ``FABRICMON_BENCH_E2E_WINDOW_S`` (60) seconds is measured:

* counter values/s received (interface counters and per-priority PFC pause counters, ~32 per
  port per sample) and rows/s written (the collector's own ``/metrics``);
* the collector's CPU-seconds (``/proc/PID/stat``, every thread), hence values per CPU-second
  end to end: decoding, counter hygiene, rates and the COPY writer together (goal: 150K);
* its memory: RSS at the end of the window and the peak (``VmHWM``) (issue 4's figure (d));
* whether it keeps up: the writer's queue and the newest stored sample's age at the window's end,
  and the effective sampling interval (a simulator starved of CPU, or held back by gRPC flow
  control when its consumer reads too slowly, samples less often than asked);
* loss, after a clean SIGTERM: for every switch and every sample time inside the window, each
  of the switch's ports has its row (rows missing = expected - stored; goal 0).

``FABRICMON_BENCH_E2E_SHARDS=N`` runs N ``fabricmon collect --shard I/N`` processes and adds their
figures up; ``FABRICMON_BENCH_E2E_WORKERS=N`` runs one ``fabricmon collect --workers N`` instead
(CPU and memory of its whole process tree, the figures of its one aggregated ``/metrics``).
Environment: ``FABRICMON_BENCH_E2E_GPUS`` (16384), ``..._INTERVAL_S`` (10), ``..._WINDOW_S`` (60,
or six intervals when longer).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.simproc import simulator
from collector import speedups
from store import copy_binary
from store.db import create_pool

GPUS = int(os.environ.get("FABRICMON_BENCH_E2E_GPUS", "16384"))
INTERVAL_S = float(os.environ.get("FABRICMON_BENCH_E2E_INTERVAL_S", "10"))
SHARDS = int(os.environ.get("FABRICMON_BENCH_E2E_SHARDS", "1"))
WORKERS = int(os.environ.get("FABRICMON_BENCH_E2E_WORKERS", "0"))
WINDOW_S = float(os.environ.get("FABRICMON_BENCH_E2E_WINDOW_S", str(max(60.0, 6 * INTERVAL_S))))
CONNECT_TIMEOUT_S = 300.0
_TICKS = os.sysconf("SC_CLK_TCK")
_SHARD_LABEL = re.compile(r'shard="[^"]*",?')
_PENDING = 'fabricmon_writer_pending_rows{table="port_counters"}'

_LOSS_SQL = """
WITH per_switch AS (
    SELECT switch, count(DISTINCT time) AS samples, count(*) AS rows
    FROM port_counters WHERE time >= $1 AND time < $2 GROUP BY switch
), ports AS (
    SELECT switch, count(*) AS ports FROM ports WHERE known GROUP BY switch
)
SELECT count(*) AS switches, sum(p.samples * ports.ports) AS expected, sum(p.rows) AS stored,
       (SELECT sum(ports) FROM ports) AS ports
FROM per_switch p JOIN ports USING (switch)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _metrics(url: str) -> dict[str, float]:
    """The Prometheus text exposition, as ``name{labels}`` → value."""
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            key = _SHARD_LABEL.sub("", key).replace("{,", "{").replace(",}", "}").replace("{}", "")
            out[key] = out.get(key, 0.0) + float(value)  # ``--workers``: every shard's sample, added up
    return out


def _tree(pid: int) -> list[int]:
    """The process and its descendants alive now (``--workers``' shard workers)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                todo.extend(int(c) for c in task.read_text().split())
    return out


def _cpu_s(pid: int) -> float:
    """CPU-seconds of the process, every thread, its live descendants and the children it reaped."""
    return sum(_cpu_split(pid))


def _cpu_split(pid: int) -> tuple[float, float]:
    """(user, system) CPU-seconds of :func:`_cpu_s`."""
    user = system = 0
    for p in _tree(pid):
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{p}/stat").read_text().rpartition(")")[2].split()
            user, system = user + int(fields[11]), system + int(fields[12])  # all threads
            if p == pid:  # workers that exited (and were waited for)
                user, system = user + int(fields[13]), system + int(fields[14])
    return user / _TICKS, system / _TICKS


def _memory_mb(pid: int) -> dict[str, float]:
    rss = peak = 0.0
    for p in _tree(pid):
        with contextlib.suppress(OSError):
            status = Path(f"/proc/{p}/status").read_text()
            found = {k: int(v) / 1024 for k, v in re.findall(r"^(VmRSS|VmHWM):\s+(\d+) kB", status, re.M)}
            rss += found["VmRSS"]
            peak = max(peak, found["VmHWM"])
    return {"rss_mb": round(rss), "peak_rss_mb": round(peak)}


async def _complete_metrics(url: str) -> dict[str, float]:
    """``_metrics``, asked again until every ``--workers`` shard answered (a busy worker's /metrics
    can miss the supervisor's 2 s scrape timeout, and a delta without it would be wrong)."""
    for _ in range(30):
        m = _metrics(url)
        if not WORKERS or m.get("fabricmon_collector_worker_up", 0) >= WORKERS:
            return m
        await asyncio.sleep(0.5)
    raise RuntimeError(f"not every one of {WORKERS} workers answered /metrics within 15 s")


@dataclass
class _Shard:
    proc: subprocess.Popen[bytes]
    url: str


async def _until_connected(shards: list[_Shard], switches: int) -> float:
    """Seconds until the shards, together, have every switch's stream connected."""
    started = time.monotonic()
    while time.monotonic() - started < CONNECT_TIMEOUT_S:
        for shard in shards:
            if shard.proc.poll() is not None:
                raise RuntimeError(f"fabricmon collect exited with {shard.proc.returncode} before connecting")
        try:
            connected = sum(_metrics(s.url).get('fabricmon_targets{state="connected"}', 0) for s in shards)
            if connected >= switches:
                return time.monotonic() - started
        except OSError:
            pass
        await asyncio.sleep(1)
    raise RuntimeError(f"not every one of {switches} gNMI targets connected within {CONNECT_TIMEOUT_S:.0f}s")


async def _drained(proc: subprocess.Popen[bytes], timeout_s: float = 120) -> bytes:
    """``proc``'s stderr once it exits after SIGTERM; if its drain does not end within
    ``timeout_s``, what its tasks wait on (SIGUSR2), then it is killed and that is an error."""
    try:
        return (await asyncio.to_thread(proc.communicate, timeout=timeout_s))[1]
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR2)
        await asyncio.sleep(2)
        proc.kill()
        _, err = await asyncio.to_thread(proc.communicate)
        tail = err.decode(errors="replace")[-20000:]
        raise RuntimeError(f"fabricmon collect did not drain within {timeout_s:.0f}s: {tail}") from None


async def run(dsn: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="fabricmon-bench-e2e-") as tmp:
        config = Path(tmp) / "fabricmon.yaml"
        # Plaintext, comparable with the figures before TLS became the default (TLS beside plaintext:
        # bench/gnmi_collector.py).
        sim_args = ["--gpus", str(GPUS), "--gnmi", "127.0.0.1:0", "--snmp", "", "--control", "", "--plaintext"]
        async with simulator(*sim_args, "--protocols", "gnmi", "--write-config", str(config)) as (sim, _):
            env = {
                **os.environ,
                "FABRICMON_DATABASE__DSN": dsn,
                "FABRICMON_COLLECTOR__GNMI_INTERVAL_S": str(INTERVAL_S),
            }
            shards: list[_Shard] = []
            switches = 0
            try:
                for i in range(1 if WORKERS else SHARDS):
                    at = f"127.0.0.1:{_free_port()}"
                    args = ["collect", "--config", str(config), "--metrics-listen", at]
                    args += ["--shard", f"{i}/{SHARDS}"] if SHARDS > 1 and not WORKERS else []
                    args += ["--workers", str(WORKERS)] if WORKERS else []
                    proc = subprocess.Popen(  # noqa: ASYNC220 - polled and signalled by pid, read once at exit
                        [sys.executable, "-m", "cli.main", *args],
                        env=env,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE,
                    )
                    shards.append(_Shard(proc, f"http://{at}/metrics"))
                    if i == 0:  # the first migrates the store; the others start on a ready schema
                        switches = await _until_schema(dsn)
                return await _measure(dsn, shards, switches, sim.pid)
            finally:
                for shard in shards:
                    if shard.proc.poll() is None:
                        shard.proc.kill()
                    shard.proc.wait(timeout=30)


async def _until_schema(dsn: str) -> int:
    """Wait for the migrated schema and the loaded inventory; the number of switches."""
    pool = await create_pool(dsn)
    try:
        while True:
            async with pool.acquire() as conn:
                ready = await conn.fetchval("SELECT to_regclass('switches') IS NOT NULL")
                if ready and (switches := await conn.fetchval("SELECT count(*) FROM switches WHERE known")):
                    return int(switches)
            await asyncio.sleep(1)
    finally:
        await pool.close()


def _machine_busy_s() -> float:
    """CPU-seconds the whole machine has been busy (every core; /proc/stat, not idle or iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


async def _measure(dsn: str, shards: list[_Shard], switches: int, sim_pid: int) -> dict[str, Any]:
    connect_s = await _until_connected(shards, switches)
    await asyncio.sleep(INTERVAL_S * 1.5)  # past every stream's first full dump
    m0 = [await _complete_metrics(s.url) for s in shards]
    sim0, busy0 = _cpu_s(sim_pid), _machine_busy_s()
    split0 = [_cpu_split(s.proc.pid) for s in shards]
    cpu0, t0, wall0 = sum(map(sum, split0)), time.monotonic(), datetime.now(UTC)
    print(f"bench: collect_e2e measuring {WINDOW_S:.0f}s over {switches} switches", file=sys.stderr, flush=True)
    await asyncio.sleep(WINDOW_S)
    m1 = [await _complete_metrics(s.url) for s in shards]
    split1 = [_cpu_split(s.proc.pid) for s in shards]
    cpu1, t1, wall1 = sum(map(sum, split1)), time.monotonic(), datetime.now(UTC)
    system_s = sum(b[1] - a[1] for a, b in zip(split0, split1, strict=True))
    sim1, busy1 = _cpu_s(sim_pid), _machine_busy_s()
    memory = [_memory_mb(s.proc.pid) for s in shards]
    pool = await create_pool(dsn)
    try:
        async with pool.acquire() as conn:
            newest = await conn.fetchval("SELECT max(time) FROM port_counters")
        for shard in shards:
            shard.proc.send_signal(signal.SIGTERM)
        for shard in shards:
            err = await _drained(shard.proc)
            if shard.proc.returncode != 0:
                raise RuntimeError(f"fabricmon collect exited {shard.proc.returncode}: {err.decode()[-2000:]}")
        # Sample times strictly inside the window, one interval clear of each edge: every such
        # notification was received (the stream is in sync) and, after the drain, written.
        async with pool.acquire() as conn:
            loss = await conn.fetchrow(
                _LOSS_SQL, wall0 + timedelta(seconds=INTERVAL_S), wall1 - timedelta(seconds=INTERVAL_S)
            )
    finally:
        await pool.close()

    def delta(name: str) -> float:
        return sum(after.get(name, 0.0) - before.get(name, 0.0) for before, after in zip(m0, m1, strict=True))

    wall, cpu = t1 - t0, cpu1 - cpu0
    values = delta("fabricmon_collector_gnmi_values_total")  # every counter value: interfaces and PFC
    rows = delta('fabricmon_writer_rows_total{outcome="written",table="port_counters"}')
    pfc_rows = delta('fabricmon_writer_rows_total{outcome="written",table="pfc_counters"}')
    expected, stored = int(loss["expected"] or 0), int(loss["stored"] or 0)
    inner_s = wall - 2 * INTERVAL_S
    return {
        "gpus": GPUS,
        "switches": switches,
        "shards": WORKERS or SHARDS,
        "workers": WORKERS,
        "interval_s": INTERVAL_S,
        "connect_s": round(connect_s, 1),
        "window_s": round(wall, 1),
        "values_per_s": round(values / wall),
        "port_rows_per_s": round(rows / wall),
        "pfc_rows_per_s": round(pfc_rows / wall),
        "collector_cpu_s": round(cpu, 1),
        "collector_cores": round(cpu / wall, 2),
        # of which in the kernel (socket reads and writes, epoll, page faults)
        "collector_system_share": round(system_s / max(cpu, 1e-9), 2),
        "values_per_cpu_s": round(values / max(cpu, 1e-9)),
        # who else had the cores: the simulator, and the whole machine (PostgreSQL is most of the rest)
        "simulator_cores": round((sim1 - sim0) / wall, 2),
        "machine_busy_cores": round((busy1 - busy0) / wall, 2),
        "cpus": os.cpu_count(),
        "gnmi_transport": os.environ.get("FABRICMON_COLLECTOR__GNMI_TRANSPORT", "h2"),
        # the per-value path: "c" (collector/_speedups.c) or why the Python ran
        "speedups": speedups.unavailable or "c",
        # the writers' COPY encoder: "c" (store/_copy_binary.c) or why asyncpg encoded
        "copy_encoder": copy_binary.unavailable or "c",
        "cpu_s_per_million_values": round(cpu / max(values, 1) * 1e6, 2),
        "rss_mb": sum(m["rss_mb"] for m in memory),
        "peak_rss_mb_per_process": max(m["peak_rss_mb"] for m in memory),
        "writer_queue_rows_at_end": int(
            sum(m.get('fabricmon_writer_pending_rows{table="port_counters"}', 0) for m in m1)
        ),
        "newest_sample_age_s": round((wall1 - newest).total_seconds(), 1) if newest else None,
        # Sample times per port inside the inner window: under the interval when the simulator
        # and the collectors, sharing the machine's cores, cannot keep the pace.
        "effective_interval_s": round(inner_s / (stored / int(loss["ports"])), 1) if stored else None,
        "loss": {
            "switches": int(loss["switches"] or 0),
            "rows_expected": expected,
            "rows_stored": stored,
            "rows_missing": expected - stored,
        },
        "goals": {
            "values_per_cpu_s_150k": values / max(cpu, 1e-9) >= 150_000,
            "zero_loss": expected == stored and expected > 0 and int(loss["switches"] or 0) == switches,
        },
    }

"""gNMI collector throughput: ours (our HTTP/2 client + the bytes-level decoder) against pygnmi's subscribe loop.

One simulator subprocess (``fabricmon sim``) serves the fabric; each consumer then runs in a
subprocess of its own, so its CPU time (``getrusage``, every thread included: gRPC's and
pygnmi's) is its own, against the same simulator, the same subscriptions (the ``openconfig``
profile: counters, PFC and pause SAMPLE at the interval, oper-status/speed/LLDP ON_CHANGE), the
same interval and the same window:

* ``ours``: :class:`collector.gnmi.GnmiCollector` into a Sink that only counts readings;
* ``pygnmi``: ``gNMIclient.subscribe2`` per switch (pygnmi's thread and queue per
  subscription, ``telemetryParser`` per response), one consumer thread per subscription
  counting the updates of each parsed notification.

* ``bare``: grpc.aio alone, the same Subscribe streams read as raw bytes and only counted: the
  floor of grpc.aio's per-message cost (issue 14's part 2);
* ``h2bare``: the same with our own HTTP/2 client (wire/grpc_h2.py), the collector's default.

``ours`` and ``h2bare`` run twice: against a ``--plaintext`` simulator and against one serving
TLS (its default, SPEC §10.6), the consumer verifying its CA; the others read plaintext only.

Both count values only inside the window that starts once every stream has synced. The result
is values per CPU-second for each and their ratio (goal: ours >= 150K/s and >= 3x pygnmi).
Environment: ``FABRICMON_BENCH_GNMI_GPUS`` (1024), ``..._INTERVAL_S`` (1), ``..._WINDOW_S`` (20): 40
switches, 5,120 ports, ~160K values/s offered, which pygnmi cannot keep up with on 2 cores
(its figure is then what it manages per CPU-second while saturated).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

from pygnmi.spec.v080 import gnmi_pb2

from bench.simproc import simulator
from collector.config import PLAINTEXT, CollectorConfig, TlsConfig
from collector.gnmi import GnmiCollector, GnmiTuning
from collector.gnmi_stream import subscribe_request
from collector.gnmi_transport import build_channel
from collector.profile_load import load_profile
from collector.records import LldpReading, PortReading, TargetState
from collector.targets import SwitchTarget
from fabric.model import FabricParams
from fabric.topology import build_aipod

GPUS = int(os.environ.get("FABRICMON_BENCH_GNMI_GPUS", "1024"))
INTERVAL_S = float(os.environ.get("FABRICMON_BENCH_GNMI_INTERVAL_S", "1"))
WINDOW_S = float(os.environ.get("FABRICMON_BENCH_GNMI_WINDOW_S", "20"))
SYNC_TIMEOUT_S = 300.0


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _result(values: int, cpu_s: float, wall_s: float, **extra: Any) -> dict[str, Any]:
    return {
        "values": values,
        "window_s": round(wall_s, 2),
        "cpu_s": round(cpu_s, 2),
        "values_per_s": round(values / wall_s),
        "values_per_cpu_s": round(values / max(cpu_s, 1e-9)),
        "cpu_s_per_million_values": round(cpu_s / max(values, 1) * 1e6, 2),
        **extra,
    }


# --- the consumers (each in its own process) ------------------------------------------------


class _CountingSink:
    def __init__(self) -> None:
        self.readings = 0
        self.invalid = 0
        self.states: dict[str, TargetState] = {}

    async def put_ports(self, readings: Sequence[PortReading]) -> None:
        self.readings += len(readings)

    async def put_lldp(self, readings: Sequence[LldpReading]) -> None:
        pass

    def set_state(self, switch: str, state: TargetState, detail: str | None = None) -> None:
        self.states[switch] = state

    def count_invalid(self, switch: str, what: str, n: int = 1) -> None:
        self.invalid += n


def _tls(ca: str | None) -> TlsConfig:
    return PLAINTEXT if ca is None else TlsConfig(ca_file=ca)


async def consume_ours(
    address: str, switches: list[str], interval_s: float, window_s: float, tls: TlsConfig, tuning: GnmiTuning
) -> dict[str, Any]:
    sink = _CountingSink()
    targets = [SwitchTarget(switch=s, protocol="gnmi", address=address, gnmi_target=s, tls=tls) for s in switches]
    collector = GnmiCollector(targets, sink, CollectorConfig(gnmi_interval_s=interval_s), tuning=tuning)
    task = asyncio.create_task(collector.run())
    try:
        started = time.monotonic()
        while sum(s is TargetState.CONNECTED for s in sink.states.values()) < len(switches):
            if task.done() or time.monotonic() - started > SYNC_TIMEOUT_S:
                raise RuntimeError(f"only {len(sink.states)} of {len(switches)} streams synced")
            await asyncio.sleep(0.05)
        sync_s = time.monotonic() - started
        stats = collector.stats
        v0, r0, m0, cpu0, t0 = stats.values, sink.readings, stats.responses, _cpu(), time.monotonic()
        await asyncio.sleep(window_s)
        v1, r1, m1, cpu1, t1 = stats.values, sink.readings, stats.responses, _cpu(), time.monotonic()
        return _result(
            v1 - v0,
            cpu1 - cpu0,
            t1 - t0,
            readings=r1 - r0,
            messages=m1 - m0,
            cpu_us_per_message=round((cpu1 - cpu0) / max(m1 - m0, 1) * 1e6, 1),
            first_sync_s=round(sync_s, 2),
            invalid=sink.invalid,
        )
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def consume_raw(
    transport: str,
    address: str,
    switches: list[str],
    interval_s: float,
    window_s: float,
    tls: TlsConfig = PLAINTEXT,
    tuning: GnmiTuning | None = None,
) -> dict[str, Any]:
    """A transport's floor (``grpc``: grpc.aio, ``h2``: wire/grpc_h2.py): every stream's
    responses read as bytes and counted, nothing decoded; one channel for the simulator's address."""
    profile = load_profile("openconfig")
    messages = 0
    channel = build_channel(transport, address, tls, tuning or GnmiTuning())

    async def read(request: gnmi_pb2.SubscribeRequest) -> None:
        nonlocal messages
        call = await channel.subscribe(())
        await call.write(request.SerializeToString())
        while batch := await call.read_batch():
            messages += len(batch)

    requests = [
        subscribe_request(profile, target, subs, interval_s, poll=False)
        for sw in switches
        for target, subs in profile.streams(sw, sw).items()
    ]
    tasks = [asyncio.create_task(read(r)) for r in requests]
    try:
        await asyncio.sleep(max(3 * interval_s, 5.0))  # past the first dumps
        m0, cpu0, t0 = messages, _cpu(), time.monotonic()
        await asyncio.sleep(window_s)
        m1, cpu1, t1 = messages, _cpu(), time.monotonic()
        if any(t.done() for t in tasks):
            raise RuntimeError(f"a {transport} stream ended early")
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await channel.close()
    n = max(m1 - m0, 1)
    return {
        "messages": m1 - m0,
        "window_s": round(t1 - t0, 2),
        "cpu_s": round(cpu1 - cpu0, 2),
        "messages_per_s": round((m1 - m0) / (t1 - t0)),
        "cpu_us_per_message": round((cpu1 - cpu0) / n * 1e6, 1),
    }


def consume_pygnmi(address: str, switches: list[str], interval_s: float, window_s: float) -> dict[str, Any]:
    from pygnmi.client import gNMIclient

    host, _, port = address.rpartition(":")
    subs = [
        {"path": s.path, "mode": s.mode, **({"sample_interval": int(interval_s * 1e9)} if s.mode == "sample" else {})}
        for s in load_profile("openconfig").subscriptions
    ]
    counts = [0] * len(switches)
    synced = threading.Semaphore(0)
    stop = threading.Event()
    default_hook = threading.excepthook

    def quiet_after_stop(args: Any) -> None:  # pygnmi's threads raise CANCELLED when we close them
        if not stop.is_set():
            default_hook(args)

    threading.excepthook = quiet_after_stop

    def consume(i: int, sub: Any) -> None:
        first = True
        for resp in sub:  # StreamSubscriber: the merged dump first, then one parsed response each
            if first:
                first = False
                synced.release()
                continue
            counts[i] += len(resp.get("update", {}).get("update", ()))
            if stop.is_set():
                return

    with gNMIclient(target=(host, int(port)), insecure=True) as client:
        started = time.monotonic()
        subscribers = [
            client.subscribe2(
                subscribe={"subscription": [dict(s) for s in subs], "mode": "stream", "encoding": "proto"}, target=sw
            )
            for sw in switches
        ]
        threads = [threading.Thread(target=consume, args=(i, s), daemon=True) for i, s in enumerate(subscribers)]
        for t in threads:
            t.start()
        for _ in switches:
            if not synced.acquire(timeout=SYNC_TIMEOUT_S):
                raise RuntimeError("pygnmi: not every stream synced")
        sync_s = time.monotonic() - started
        v0, cpu0, t0 = sum(counts), _cpu(), time.monotonic()
        time.sleep(window_s)
        v1, cpu1, t1 = sum(counts), _cpu(), time.monotonic()
        stop.set()
        for s in subscribers:
            s.close()
    return _result(v1 - v0, cpu1 - cpu0, t1 - t0, first_sync_s=round(sync_s, 2), threads=2 * len(switches))


# --- the orchestration ----------------------------------------------------------------------


async def _subprocess_json(*args: str) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.gnmi_collector", *args, stdout=subprocess.PIPE
    )
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"consumer {args[:2]} failed with exit code {proc.returncode}")
    result: dict[str, Any] = json.loads(out)
    return result


async def run(dsn: str) -> dict[str, Any]:
    """Every consumer against a plaintext simulator, ours and h2bare against a TLS one too; this
    benchmark never touches the database."""
    del dsn
    fabric = build_aipod(FabricParams(gpus=GPUS))
    switches = sorted(fabric.switches)
    sim_args = ("--gpus", str(GPUS), "--gnmi", "127.0.0.1:0", "--snmp", "", "--control", "")
    async with simulator(*sim_args, "--plaintext") as (_, ready):
        common = ["--address", ready["gnmi"], "--interval", str(INTERVAL_S), "--seconds", str(WINDOW_S)]
        ours = await _subprocess_json("--consumer", "ours", *common)
        theirs = await _subprocess_json("--consumer", "pygnmi", *common)
        bare = await _subprocess_json("--consumer", "bare", *common)
        h2_bare = await _subprocess_json("--consumer", "h2bare", *common)
    with tempfile.TemporaryDirectory(prefix="fabricmon-bench-tls-") as tls_dir:
        async with simulator(*sim_args, "--tls-dir", tls_dir) as (_, ready):
            common = ["--address", ready["gnmi"], "--interval", str(INTERVAL_S), "--seconds", str(WINDOW_S)]
            common += ["--ca", ready["tls_ca"]]
            ours_tls = await _subprocess_json("--consumer", "ours", *common)
            h2_bare_tls = await _subprocess_json("--consumer", "h2bare", *common)
    ratio = ours["values_per_cpu_s"] / max(theirs["values_per_cpu_s"], 1)
    values_per_message = ours["values"] / max(ours["messages"], 1)
    return {
        "gpus": GPUS,
        "switches": len(switches),
        "ports": sum(1 for _ in fabric.all_ports()),
        "interval_s": INTERVAL_S,
        "ours": ours,
        "ours_tls": ours_tls,
        "pygnmi": theirs,
        "grpc_bare": bare,
        "h2_bare": h2_bare,
        "h2_bare_tls": h2_bare_tls,
        "values_per_message": round(values_per_message, 1),
        # Values per CPU-second with nothing done but reading the messages: what grpc.aio allows.
        "grpc_ceiling_values_per_cpu_s": round(values_per_message / max(bare["cpu_us_per_message"], 1e-9) * 1e6),
        "h2_ceiling_values_per_cpu_s": round(values_per_message / max(h2_bare["cpu_us_per_message"], 1e-9) * 1e6),
        "ratio_values_per_cpu_s": round(ratio, 2),
        "tls_share_of_plaintext_values_per_cpu_s": round(
            ours_tls["values_per_cpu_s"] / max(ours["values_per_cpu_s"], 1), 2
        ),
        "pygnmi_share_of_stream": round(theirs["values_per_s"] / max(ours["values_per_s"], 1), 2),
        "goals": {
            "values_per_cpu_s_150k": ours["values_per_cpu_s"] >= 150_000,
            "values_per_cpu_s_150k_over_tls": ours_tls["values_per_cpu_s"] >= 150_000,
            "three_times_pygnmi": ratio >= 3.0,
        },
    }


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.gnmi_collector", description=__doc__.splitlines()[0])
    p.add_argument("--consumer", choices=["ours", "pygnmi", "bare", "h2bare"])
    p.add_argument("--address")
    p.add_argument("--interval", type=float, default=INTERVAL_S)
    p.add_argument("--seconds", type=float, default=WINDOW_S)
    p.add_argument("--ca", help="the simulator serves TLS with this CA (ours, h2bare)")
    p.add_argument("--coalesce", type=float, default=GnmiTuning().read_coalesce_s, help="read coalescing (s)")
    a = p.parse_args()
    if a.consumer is None:  # the whole benchmark, standalone
        print(json.dumps(asyncio.run(run("")), indent=2))
        return
    switches = sorted(build_aipod(FabricParams(gpus=GPUS)).switches)
    tls, tuning = _tls(a.ca), GnmiTuning(read_coalesce_s=a.coalesce)
    if a.consumer == "ours":
        result = asyncio.run(consume_ours(a.address, switches, a.interval, a.seconds, tls, tuning))
    elif a.consumer in ("bare", "h2bare"):
        transport = "grpc" if a.consumer == "bare" else "h2"
        result = asyncio.run(consume_raw(transport, a.address, switches, a.interval, a.seconds, tls, tuning))
    else:
        result = consume_pygnmi(a.address, switches, a.interval, a.seconds)
    print(json.dumps(result))


if __name__ == "__main__":
    main()

"""A minimal gNMI consumer for benchmarks: one grpc.aio channel, one STREAM per switch.

``python -m bench.gnmi_consumer HOST:PORT --switches a,b,... --seconds S [--interval S]``
prints JSON: values and notifications received after each stream's first sync, and this
process's CPU seconds. It decodes every message (``SubscribeResponse.FromString``) and counts
values, which is the least any collector must do.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import resource
import time
from collections.abc import AsyncIterator

import grpc
from pygnmi.create_gnmi_path import gnmi_path_generator
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

COUNTERS = "/interfaces/interface[name=*]/state/counters"


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def consume(
    address: str, switches: list[str], seconds: float, interval_s: float, grace_s: float = 15.0
) -> dict[str, float]:
    channel = grpc.aio.insecure_channel(address, options=[("grpc.max_receive_message_length", 64 << 20)])
    stub = gnmi_pb2_grpc.gNMIStub(channel)
    counts = {"values": 0, "notifications": 0, "synced": 0, "dump_values": 0}
    lags: list[float] = []
    done = asyncio.Event()
    all_synced = asyncio.Event()

    async def one(switch: str) -> None:
        req = gnmi_pb2.SubscribeRequest(
            subscribe=gnmi_pb2.SubscriptionList(
                prefix=gnmi_pb2.Path(target=switch),
                subscription=[
                    gnmi_pb2.Subscription(
                        path=gnmi_path_generator(COUNTERS),
                        mode=gnmi_pb2.SubscriptionMode.SAMPLE,
                        sample_interval=int(interval_s * 1e9),
                    )
                ],
                mode=gnmi_pb2.SubscriptionList.Mode.STREAM,
                encoding=gnmi_pb2.Encoding.PROTO,
            )
        )

        async def requests() -> AsyncIterator[gnmi_pb2.SubscribeRequest]:
            yield req
            await done.wait()

        synced = False
        call = stub.Subscribe(requests())
        try:
            async for resp in call:
                if resp.HasField("sync_response"):
                    synced = True
                    counts["synced"] += 1
                    if counts["synced"] == len(switches):
                        all_synced.set()
                    continue
                n = len(resp.update.update)
                ts = resp.update.timestamp / 1e9
                if synced and window[0] <= ts < window[1]:
                    counts["values"] += n
                    counts["notifications"] += 1
                    lags.append(time.time() - ts)
                elif not synced:
                    counts["dump_values"] += n
        except grpc.aio.AioRpcError:
            if not done.is_set():
                raise
        finally:
            call.cancel()

    # Counted: notifications *stamped* inside the window, even if they arrive after it (a lag
    # is not a loss), so the figure is the rate the target produces and delivers.
    window = [math.inf, math.inf]
    tasks = [asyncio.create_task(one(s)) for s in switches]
    started = time.monotonic()
    await asyncio.wait_for(all_synced.wait(), 300)
    sync_s = time.monotonic() - started
    cpu0, t0 = _cpu(), time.monotonic()
    window[0] = time.time()
    window[1] = window[0] + seconds
    await asyncio.sleep(seconds)
    cpu1, t1 = _cpu(), time.monotonic()
    await asyncio.sleep(grace_s)  # late deliveries of in-window samples still count
    done.set()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await channel.close()
    return {
        "streams": len(switches),
        "synced": counts["synced"],
        "first_dump_s": round(sync_s, 2),
        "window_s": round(t1 - t0, 2),
        "values": counts["values"],
        "values_per_s": round(counts["values"] / (t1 - t0)),
        "notifications": counts["notifications"],
        "consumer_cpu_s": round(cpu1 - cpu0, 2),
        "lag_p50_s": round(_quantile(lags, 0.5), 3),
        "lag_p99_s": round(_quantile(lags, 0.99), 3),
        "lag_max_s": round(max(lags, default=0.0), 3),
    }


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("address")
    p.add_argument("--switches", required=True)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--interval", type=float, default=10.0)
    a = p.parse_args()
    result = asyncio.run(consume(a.address, a.switches.split(","), a.seconds, a.interval))
    print(json.dumps(result))


if __name__ == "__main__":
    main()

"""A hostile gNMI target on real gRPC: issue 28's messages, then a plain one, on one stream.

The server streams every ``issue28-*`` reproduction of the fuzz corpus (tests/fixtures/fuzz/gnmi)
after its ``sync_response``, then a plain counter. Before the fix the LLDP id ``²`` made
``close_group`` raise: the stream went to ERROR and every resubscribe failed in ``begin()``; the
counters and the JSON raised out of ``feed``; the decimal stalled the worker. Now each is counted
by reason, the stream stays CONNECTED without a reconnect, and the plain counter is read.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
from pygnmi.spec.v080 import gnmi_pb2

from collector.gnmi import GnmiTuning
from collector.records import TargetState
from tests.integration.test_collector_gnmi import RecordingSink, collecting, gnmi_target
from tests.support.gnmi_fuzz import IF, PROBE, SEEDS, SW, TS, one, typed
from tests.support.waiting import until

HOSTILE = [data for name, data in sorted(SEEDS.items()) if name.startswith("issue28-")]


async def _hostile_subscribe(request_iterator: Any, context: Any) -> None:
    await context.read()
    await context.write(gnmi_pb2.SubscribeResponse(sync_response=True).SerializeToString())
    for data in HOSTILE:
        await context.write(data)
    await context.write(one(IF, "state/counters/in-octets", typed(uint_val=PROBE), ts=TS + 10**9))
    await asyncio.sleep(3600)  # keep the stream open


async def test_a_hostile_target_costs_its_values_not_its_stream() -> None:
    server = grpc.aio.server()
    handler = grpc.stream_stream_rpc_method_handler(
        _hostile_subscribe, request_deserializer=gnmi_pb2.SubscribeRequest.FromString, response_serializer=None
    )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("gnmi.gNMI", {"Subscribe": handler}),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    sink = RecordingSink()
    tuning = GnmiTuning(backoff_initial_s=0.2, backoff_max_s=1.0)
    try:
        async with collecting([gnmi_target(SW, f"127.0.0.1:{port}")], sink, tuning=tuning) as collector:
            await until(lambda: any(r.in_octets == PROBE for r in sink.ports), 10, "the plain counter after them")
            await asyncio.sleep(0.3)
            reasons = {what: n for (sw, what), n in sink.invalid.items() if sw == SW}
            assert reasons == {
                "out_of_range": 2,  # the two decimal precisions
                "too_long": 3,  # the 4301-digit LLDP id, counter and speed
                "unknown_path": 2,  # the PFC key '²', the deprecated Path.element
                "too_deep": 1,  # json_ietf nested 1,100 deep
                "malformed": 2,  # the empty uint_val, and the one with two varints
            }
            assert [len(t.neighbors) for t in sink.lldp] == [1]  # the neighbour '²'
            assert sink.state(SW) is TargetState.CONNECTED and collector.stats.reconnects == 0
            assert TargetState.ERROR not in sink.history(SW)
    finally:
        await server.stop(0)

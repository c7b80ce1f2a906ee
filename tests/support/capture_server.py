"""A gNMI target on loopback that replays recorded responses: real gRPC, no simulator behind it.

Each Subscribe is answered with the serialized responses recorded for the request's prefix
target (the switch name, or SONiC's database), a ``sync_response`` unless the recording has one,
and the stream then stays open (a STREAM subscription's device keeps it open until the client
goes). A target with no recording is refused with NOT_FOUND, as a switch refuses an unknown one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import grpc
from pygnmi.spec.v080 import gnmi_pb2

SYNC: bytes = gnmi_pb2.SubscribeResponse(sync_response=True).SerializeToString()


class CaptureTarget:
    """Serves ``recordings`` (prefix target → serialized SubscribeResponses) on 127.0.0.1."""

    def __init__(self, recordings: Mapping[str, Sequence[bytes]]) -> None:
        self.recordings = recordings
        self.requests: list[Any] = []  # the SubscribeRequests received, in order
        self._server = grpc.aio.server()
        handler = grpc.stream_stream_rpc_method_handler(
            self._subscribe, request_deserializer=gnmi_pb2.SubscribeRequest.FromString, response_serializer=None
        )
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("gnmi.gNMI", {"Subscribe": handler}),)
        )
        self.address = ""

    async def start(self) -> str:
        """Listen on an ephemeral loopback port; returns ``host:port``."""
        port = self._server.add_insecure_port("127.0.0.1:0")
        await self._server.start()
        self.address = f"127.0.0.1:{port}"
        return self.address

    async def stop(self) -> None:
        await self._server.stop(0)

    async def _subscribe(self, request_iterator: Any, context: Any) -> None:
        request = await context.read()
        self.requests.append(request)
        target = request.subscribe.prefix.target
        recording = self.recordings.get(target)
        if recording is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no such target: {target!r}")
            return
        for raw in recording:
            await context.write(raw)
        if SYNC not in recording:
            await context.write(SYNC)
        await asyncio.Event().wait()  # open until the client cancels (or the server stops)

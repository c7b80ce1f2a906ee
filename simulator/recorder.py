"""``fabricmon record``: subscribe to any gNMI target and write its raw stream to a recording.

Works against fabricmon's simulator and against real switches: a STREAM subscription with
SAMPLE for counters and ON_CHANGE for state and LLDP, over ``grpc.aio`` with pygnmi's protobufs.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from pygnmi.create_gnmi_path import gnmi_path_generator
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

from fabric.errors import FabricmonError
from simulator.recording import Header, write_entry, write_header

#: What a recording holds by default: every interface leaf, PFC, LLDP.
DEFAULT_SAMPLED = ("/interfaces", "/qos/interfaces")
DEFAULT_ON_CHANGE = ("/lldp/interfaces",)


class RecordError(FabricmonError, ConnectionError):
    """The target refused the subscription or the stream failed."""


@dataclass(frozen=True, slots=True)
class RecordOptions:
    """Where to connect and what to ask for."""

    address: str
    switch: str
    out: Path
    duration_s: float | None = None
    interval_s: float = 10.0
    sampled: tuple[str, ...] = DEFAULT_SAMPLED
    on_change: tuple[str, ...] = DEFAULT_ON_CHANGE
    ca_file: Path | None = None  # None: the system's CAs
    #: TLS with verification unless False (SPEC §10.6); credentials then need the next flag.
    tls: bool = True
    allow_plaintext_credentials: bool = False
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    timeout_s: float = 10.0

    def __post_init__(self) -> None:
        if not self.tls and self.username is not None and not self.allow_plaintext_credentials:
            raise RecordError("credentials would travel in plaintext: use TLS or --allow-plaintext-credentials")


@dataclass(slots=True)
class RecordResult:
    """What a recording run wrote."""

    responses: int = 0
    updates: int = 0
    syncs: int = 0
    seconds: float = 0.0


def subscribe_request(opts: RecordOptions) -> gnmi_pb2.SubscribeRequest:
    """The STREAM request: SAMPLE for ``sampled`` paths, ON_CHANGE for the others."""
    subs = [
        gnmi_pb2.Subscription(
            path=gnmi_path_generator(p),
            mode=gnmi_pb2.SubscriptionMode.SAMPLE,
            sample_interval=int(opts.interval_s * 1e9),
        )
        for p in opts.sampled
    ] + [
        gnmi_pb2.Subscription(path=gnmi_path_generator(p), mode=gnmi_pb2.SubscriptionMode.ON_CHANGE)
        for p in opts.on_change
    ]
    return gnmi_pb2.SubscribeRequest(
        subscribe=gnmi_pb2.SubscriptionList(
            prefix=gnmi_pb2.Path(target=opts.switch),
            subscription=subs,
            mode=gnmi_pb2.SubscriptionList.Mode.STREAM,
            encoding=gnmi_pb2.Encoding.PROTO,
        )
    )


def _channel(opts: RecordOptions) -> grpc.aio.Channel:
    if not opts.tls:
        return grpc.aio.insecure_channel(opts.address)
    roots = opts.ca_file.read_bytes() if opts.ca_file is not None else None
    creds = grpc.ssl_channel_credentials(root_certificates=roots)
    return grpc.aio.secure_channel(opts.address, creds)


async def record(opts: RecordOptions) -> RecordResult:
    """Record until ``duration_s`` passes (or forever); always leaves a readable file."""
    result = RecordResult()
    started = time.monotonic()
    metadata = []
    if opts.username is not None:
        metadata = [("username", opts.username), ("password", opts.password or "")]
    header = Header(opts.switch, opts.address, [*opts.sampled, *opts.on_change], time.time_ns())
    channel = _channel(opts)
    try:
        async with asyncio.timeout(opts.timeout_s):
            await channel.channel_ready()
    except TimeoutError:
        await channel.close()
        raise RecordError(f"{opts.address}: no gNMI server answered within {opts.timeout_s:g} s") from None
    stub = gnmi_pb2_grpc.gNMIStub(channel)
    with opts.out.open("w", encoding="utf-8") as out:
        write_header(out, header)
        hold_open = asyncio.Event()

        async def requests() -> AsyncIterator[gnmi_pb2.SubscribeRequest]:
            yield subscribe_request(opts)
            await hold_open.wait()  # keep our send side open: some targets end a stream on half-close

        call = stub.Subscribe(requests(), metadata=metadata)

        async def consume() -> None:
            async for response in call:
                write_entry(out, time.time_ns(), response)
                result.responses += 1
                if response.HasField("sync_response"):
                    result.syncs += 1
                else:
                    result.updates += len(response.update.update)

        try:
            async with asyncio.timeout(opts.duration_s):
                await consume()
        except TimeoutError:
            pass  # the duration is up: a normal end
        except grpc.aio.AioRpcError as exc:
            raise RecordError(f"{opts.address} ({opts.switch}): {exc.code().name}: {exc.details()}") from None
        finally:
            hold_open.set()
            call.cancel()
            with contextlib.suppress(Exception):
                await channel.close()
    result.seconds = time.monotonic() - started
    return result

"""``fabricmon record``: a switch's raw gNMI stream into a JSONL recording, for replay."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path

from cli.output import emit
from simulator.recorder import RecordOptions, record


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("record", parents=[common], help="record a switch's gNMI telemetry stream for replay")
    p.add_argument("--switch", required=True, help="the gNMI target name (path prefix target)")
    p.add_argument("--address", required=True, metavar="HOST:PORT", help="the gNMI server")
    p.add_argument("--out", required=True, type=Path, metavar="FILE", help="JSONL file to write")
    p.add_argument("--duration", type=float, metavar="S", help="stop after S seconds (default: until Ctrl-C)")
    p.add_argument("--interval", type=float, default=10.0, metavar="S", help="SAMPLE interval for counters (10)")
    p.add_argument(
        "--ca-file", type=Path, help="verify the server's TLS certificate with this CA (default: system CAs)"
    )
    p.add_argument("--plaintext", action="store_true", help="no TLS (a --plaintext simulator, a lab switch)")
    p.add_argument("--allow-plaintext-credentials", action="store_true", help="send --username over --plaintext")
    p.add_argument("--username", help="gNMI username (password from $FABRICMON_GNMI_PASSWORD)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    opts = RecordOptions(
        address=args.address,
        switch=args.switch,
        out=args.out,
        duration_s=args.duration,
        interval_s=args.interval,
        ca_file=args.ca_file,
        tls=not args.plaintext,
        allow_plaintext_credentials=args.allow_plaintext_credentials,
        username=args.username,
        password=os.environ.get("FABRICMON_GNMI_PASSWORD"),
    )

    async def main() -> None:
        task = asyncio.ensure_future(record(opts))
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        try:
            result = await task
        except asyncio.CancelledError:
            print(f"stopped; {args.out} holds what arrived so far", file=sys.stderr)
            return
        emit(
            args.json,
            {"out": str(args.out), "responses": result.responses, "updates": result.updates, "syncs": result.syncs},
            f"recorded {result.updates} updates in {result.responses} responses to {args.out}",
        )

    asyncio.run(main())
    return 0

"""A simulator in a child process, for benchmarks that must not share its CPU or GIL."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any


@contextlib.asynccontextmanager
async def simulator(*args: str) -> AsyncIterator[tuple[asyncio.subprocess.Process, dict[str, Any]]]:
    """``fabricmon sim ARGS --json`` until the block ends; yields the process and its ready message."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cli.main", "sim", *args, "--json", stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        assert proc.stdout is not None
        text = ""
        while not text.rstrip().endswith("}"):
            line = (await proc.stdout.readline()).decode()
            if not line:
                raise RuntimeError("simulator exited before it was ready")
            text += line
        yield proc, json.loads(text)
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
                await proc.wait()

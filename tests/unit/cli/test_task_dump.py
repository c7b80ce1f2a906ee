"""SIGUSR2 on a service prints what it waits on (cli/service.py): its tasks and every thread."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import asyncio, os, signal
from cli.service import stop_on_signals

async def parked_forever():
    await asyncio.Event().wait()

async def main():
    stop = asyncio.Event()
    stop_on_signals(stop)
    asyncio.get_running_loop().create_task(parked_forever(), name="parked")
    await asyncio.sleep(0)
    os.kill(os.getpid(), signal.SIGUSR2)
    await asyncio.sleep(0.5)
    os.kill(os.getpid(), signal.SIGTERM)  # still a graceful stop afterwards
    await asyncio.wait_for(stop.wait(), 5)
    print("stopped")

asyncio.run(main())
"""


def test_sigusr2_prints_every_task_and_thread_and_the_service_goes_on() -> None:
    done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "stopped", done.stderr
    assert "fabricmon: " in done.stderr and "tasks" in done.stderr
    assert "parked_forever" in done.stderr  # the task and the line it waits at
    assert "Current thread" in done.stderr or "Thread 0x" in done.stderr  # faulthandler's dump

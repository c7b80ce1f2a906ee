"""The simulator in a process of its own, as switches are in a real fabric: ``sim_process(opts)``.

Running the simulated switches in fabricmon's own event loop makes them share one core with the
collectors and the analyzer: at 1,024 GPUs, an SNMP poll of a spine then waits behind the
simulator's own gNMI fan-out and overruns its limit, and the monitor sees stalls no fabric has
(docs/decisions.md, "The drill's simulator in its own process"). Here the child process runs
:func:`simulator.runner.start_sim` with the caller's :class:`SimOptions` and reports where it
listens; the parent builds the same fabric itself (a generated AIPod or an inventory is a pure
function of the options) and drives faults through the simulator's control API (SPEC §9), as a
user's script would.

The child dies with its parent: it stops when its pipe reaches end of file (the parent closed it
or exited), and is killed if it does not stop within :data:`STOP_TIMEOUT_S`.

Errors: :class:`SimProcessError` (``FabricmonError``): the child failed to start (its message
says why), did not report within :data:`START_TIMEOUT_S`, or a fault was refused (the control
API's problem ``detail``).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import multiprocessing.connection
import traceback
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp

from fabric.errors import FabricmonError
from fabric.model import Fabric
from simulator.nos import Nos
from simulator.runner import SimEndpoints, SimOptions, build_fabric, start_sim, stop_sim

START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 20.0


class SimProcessError(FabricmonError):
    """The simulator's process failed, or refused a fault."""


class RemoteSim:
    """A simulator in another process: its endpoints, and its faults over the control API."""

    def __init__(self, endpoints: SimEndpoints, session: aiohttp.ClientSession) -> None:
        if endpoints.control is None:
            raise SimProcessError("the simulator's process has no control endpoint: faults need one")
        self.endpoints = endpoints
        self._base = f"http://{endpoints.control}"
        self._session = session

    @property
    def fabric(self) -> Fabric:
        return self.endpoints.fabric

    async def apply(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """Apply a fault (``POST /faults``); return it as applied (``id``, ``swapped_with``...)."""
        async with self._session.post(f"{self._base}/faults", json=dict(spec)) as resp:
            body: Any = await resp.json(content_type=None)
            if resp.status != 201 or not isinstance(body, dict):
                detail = body.get("detail") if isinstance(body, dict) else body
                raise SimProcessError(f"the simulator refused fault {dict(spec)}: HTTP {resp.status}: {detail}")
            return body

    async def clear(self, fault_id: str) -> bool:
        """End a fault (``DELETE /faults/{id}``); False when it was not active."""
        async with self._session.delete(f"{self._base}/faults/{fault_id}") as resp:
            if resp.status not in (204, 404):
                raise SimProcessError(f"the simulator failed to clear fault {fault_id}: HTTP {resp.status}")
            return resp.status == 204


@asynccontextmanager
async def sim_process(opts: SimOptions) -> AsyncIterator[RemoteSim]:
    """Start the simulator in a child process; yield it once it listens; stop it on exit."""
    if opts.write_config is not None or opts.scenario is not None or opts.replay is not None:
        raise SimProcessError("a simulator process serves faults only: no scenario, replay or written config")
    fabric = build_fabric(opts)  # first: a bad inventory fails here, before any process starts
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe()
    child = ctx.Process(target=_child_main, args=(opts, theirs), name="fabricmon-sim", daemon=True)
    child.start()
    theirs.close()
    try:
        ready = await _receive(ours, START_TIMEOUT_S)
        if "error" in ready:
            raise SimProcessError(f"the simulator's process failed to start: {ready['error']}")
        endpoints = SimEndpoints(fabric, ready["gnmi"], ready["snmp"], ready["control"],
                                 {k: Nos(v) for k, v in ready["nos"].items()},
                                 Path(ready["ca_file"]) if ready["ca_file"] else None)  # fmt: skip
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
            yield RemoteSim(endpoints, session)
    finally:
        ours.close()  # the child's end-of-file: it stops
        await asyncio.to_thread(child.join, STOP_TIMEOUT_S)
        if child.is_alive():
            child.kill()
            await asyncio.to_thread(child.join, STOP_TIMEOUT_S)


async def _receive(conn: multiprocessing.connection.Connection, within_s: float) -> dict[str, Any]:
    def wait() -> dict[str, Any]:
        if not conn.poll(within_s):
            raise SimProcessError(f"the simulator's process did not report within {within_s:.0f} s")
        try:
            msg: dict[str, Any] = conn.recv()
        except EOFError:
            raise SimProcessError("the simulator's process exited before it listened") from None
        return msg

    return await asyncio.to_thread(wait)


def _child_main(opts: SimOptions, conn: multiprocessing.connection.Connection) -> None:
    try:
        asyncio.run(_serve(opts, conn))
    finally:
        conn.close()


async def _serve(opts: SimOptions, conn: multiprocessing.connection.Connection) -> None:
    try:
        sim = await start_sim(opts)
    except Exception as exc:  # reported to the parent, which raises it as SimProcessError
        conn.send({"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()})
        return
    try:
        at = sim.endpoints(opts)
        conn.send({"gnmi": at.gnmi, "snmp": at.snmp, "control": at.control,
                   "nos": {k: v.value for k, v in at.nos.items()},
                   "ca_file": str(at.ca_file) if at.ca_file is not None else None})  # fmt: skip
        gone = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_reader(conn.fileno(), gone.set)  # the parent's end of file (or a stray message)
        try:
            await gone.wait()
        finally:
            loop.remove_reader(conn.fileno())
    finally:
        await stop_sim(sim)

"""The simulator in a process of its own (simulator.process): it listens where it says, its faults
go over the control API and show on the wire, a refused fault is a clear error, a child that cannot
start says why, and no child outlives its context."""

from __future__ import annotations

import asyncio
import shutil
import socket
from pathlib import Path

import pytest

from fabric.model import FabricParams
from fabric.topology import build_aipod
from simulator.process import SimProcessError, sim_process
from simulator.runner import SimOptions

pytestmark = pytest.mark.asyncio

_IF_DESCR, _IF_OPER = "1.3.6.1.2.1.2.2.1.2", "1.3.6.1.2.1.2.2.1.8"

_PARAMS = FabricParams(gpus=64)


def _opts(**kw: object) -> SimOptions:
    base: dict[str, object] = dict(params=_PARAMS, gnmi=None, snmp="127.0.0.1:0", control="127.0.0.1:0",
                                   snmp_v3=False, naming="mixed")  # fmt: skip
    base.update(kw)
    return SimOptions(**base)  # type: ignore[arg-type]


async def _oper_status(snmp: str, switch: str, port: str) -> int:
    """The port's ifOperStatus as net-snmp's snmpwalk reads it from the child's agent."""

    async def walk(oid: str) -> dict[str, str]:
        proc = await asyncio.create_subprocess_exec("snmpwalk", "-v2c", "-c", switch, "-On", "-Oq",
                                                    snmp, oid, stdout=asyncio.subprocess.PIPE)  # fmt: skip
        out, _ = await proc.communicate()
        assert proc.returncode == 0
        rows = (line.split(" ", 1) for line in out.decode().splitlines() if " " in line)
        return {k.rsplit(".", 1)[1]: v.strip().strip('"') for k, v in rows}

    index = next(i for i, name in (await walk(_IF_DESCR)).items() if name == port)
    return int((await walk(_IF_OPER))[index])


@pytest.mark.skipif(shutil.which("snmpwalk") is None, reason="net-snmp tools are not installed")
async def test_a_fault_applied_over_the_control_api_shows_on_the_child_s_snmp_agent() -> None:
    async with sim_process(_opts()) as sim:
        assert sim.fabric.switches.keys() == build_aipod(_PARAMS, "mixed").switches.keys()
        leaf = next(n for n in sim.fabric.switches if n.startswith("lf-"))
        port = sim.fabric.ports(leaf)[0].name
        snmp = sim.endpoints.snmp
        assert snmp is not None
        assert await _oper_status(snmp, leaf, port) == 1  # up
        applied = await sim.apply({"kind": "link_down", "switch": leaf, "port": port})
        assert applied["kind"] == "link_down" and applied["port"] == port
        assert await _oper_status(snmp, leaf, port) == 2  # down
        assert await sim.clear(str(applied["id"])) is True
        assert await sim.clear(str(applied["id"])) is False  # not active any more
        assert await _oper_status(snmp, leaf, port) == 1


async def test_a_refused_fault_is_a_clear_error() -> None:
    async with sim_process(_opts()) as sim:
        with pytest.raises(SimProcessError, match=r"refused fault.*HTTP 400.*no-such-switch"):
            await sim.apply({"kind": "link_down", "switch": "no-such-switch", "port": "x"})


async def test_a_child_that_cannot_listen_says_why() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SimProcessError, match=r"failed to start: OSError: .*Address already in use"):
            async with sim_process(_opts(control=f"127.0.0.1:{port}")):
                pass


async def test_a_bad_inventory_fails_before_any_child_starts(tmp_path: Path) -> None:
    bad = tmp_path / "inventory.yaml"
    bad.write_text("switches: [")
    with pytest.raises(Exception, match="inventory"):
        async with sim_process(_opts(inventory=bad)):
            pass


async def test_no_child_outlives_its_context() -> None:
    import multiprocessing

    async with sim_process(_opts()):
        children = multiprocessing.active_children()
        assert any(c.name == "fabricmon-sim" for c in children)
    await asyncio.sleep(0)
    assert not any(c.name == "fabricmon-sim" for c in multiprocessing.active_children())

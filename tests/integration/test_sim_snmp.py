"""The simulator's SNMP agent on real UDP: net-snmp tools and pysnmp against a 512-GPU FabricState."""

from __future__ import annotations

import asyncio
import shutil
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace

import pytest
import pytest_asyncio
from pysnmp.hlapi.v3arch import asyncio as hlapi

from fabric.model import FabricParams
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState
from simulator.snmp_agent import SnmpAgent, serve_snmp
from simulator.view import PortCounters, SwitchInfo
from tests.support.views import StateView

pytestmark = pytest.mark.skipif(shutil.which("snmpbulkwalk") is None, reason="net-snmp tools are not installed")

T0 = 1_767_225_600_000_000_000  # the frozen simulation clock
SPINE, SSP = "sp-r1-1", "ssp-1"
V3_USER = ["-v3", "-l", "authPriv", "-u", "fabricmon", "-a", "SHA", "-x", "AES"]
V3 = [*V3_USER, "-A", "fabricmon-auth", "-X", "fabricmon-priv"]  # the agent's documented defaults
IF_X = "1.3.6.1.2.1.31.1.1.1"
IF = "1.3.6.1.2.1.2.2.1"
LLDP_REM = "1.0.8802.1.1.2.1.4.1.1"
IEEE_PFC = "1.3.111.2.802.1.1.21.1.1.1"
CPFC = "1.3.6.1.4.1.9.9.813.1"


class Tweaked(StateView):
    """The real FabricState with distinct PFC counters per port/priority and a switch-off switch."""

    def __init__(self, state: FabricState) -> None:
        super().__init__(state)
        self.silenced: set[str] = set()

    def switch(self, name: str) -> SwitchInfo | None:
        info = self.state.switch(name)
        return replace(info, reachable=False) if info is not None and name in self.silenced else info

    def ports(self, switch: str, now_ns: int | None = None) -> list[PortCounters]:
        return [
            replace(
                p,
                pfc_tx=tuple(1000 * p.if_index + 10 * prio + 1 for prio in range(8)),
                pfc_rx=tuple(1000 * p.if_index + 10 * prio + 2 for prio in range(8)),
            )
            for p in self.state.ports(switch, now_ns)
        ]


@pytest.fixture(scope="module")
def view() -> Tweaked:
    return Tweaked(FabricState(build_aipod(FabricParams(gpus=512)), seed=0, clock=lambda: T0))


@pytest_asyncio.fixture(scope="module")
async def agent(view: Tweaked) -> AsyncIterator[SnmpAgent]:
    agent = await serve_snmp(view, "127.0.0.1", 0)
    yield agent
    await agent.stop()


async def run(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(*args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    async with asyncio.timeout(30):
        out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def net_snmp(tool: str, agent: SnmpAgent, *args: str, oids: Sequence[str] = ()) -> tuple[int, str, str]:
    # -On numeric OIDs, -OQ "oid = value" without types, -Ot raw timeticks, -m "" no MIB files
    return await run(tool, "-On", "-OQ", "-Ot", "-m", "", *args, f"127.0.0.1:{agent.port}", *oids)


def parse(out: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in out.splitlines():
        oid, _, val = line.partition(" = ")
        if val.startswith("No more variables"):
            continue
        assert oid.lstrip(".") not in values, f"duplicate {oid}"
        values[oid.lstrip(".")] = val.strip('"')
    return values


def clean(err: str) -> bool:
    """No walk error on stderr (net-snmp may note that it created its state directory)."""
    return not [line for line in err.splitlines() if line.strip() and not line.startswith("Created directory")]


def hex_of(data: bytes) -> str:
    return "".join(f"{b:02X} " for b in data)


async def bulkwalk(agent: SnmpAgent, switch: str, oid: str, *extra: str) -> dict[str, str]:
    rc, out, err = await net_snmp("snmpbulkwalk", agent, "-v2c", "-c", switch, "-Cr50", *extra, oids=[oid])
    assert rc == 0 and clean(err), err
    return parse(out)


def ports_at_t0(view: Tweaked, switch: str) -> list[PortCounters]:
    return view.ports(switch)


async def test_bulkwalk_if_x_table_matches_the_view(agent: SnmpAgent, view: Tweaked) -> None:
    got = await bulkwalk(agent, SPINE, "1.3.6.1.2.1.31.1.1")
    ports = ports_at_t0(view, SPINE)
    assert len(got) == 19 * len(ports) == 19 * 128
    for p in ports:
        i = p.if_index
        assert got[f"{IF_X}.1.{i}"] == p.name
        assert got[f"{IF_X}.6.{i}"] == str(p.in_octets)
        assert got[f"{IF_X}.10.{i}"] == str(p.out_octets)
        assert got[f"{IF_X}.7.{i}"] == str(p.in_unicast_pkts)
        assert got[f"{IF_X}.13.{i}"] == str(p.out_broadcast_pkts)
        assert got[f"{IF_X}.15.{i}"] == str(p.speed_bps // 1_000_000)
        assert got[f"{IF_X}.18.{i}"] == p.description
    got = await bulkwalk(agent, SPINE, "1.3.6.1.2.1.2.2")  # ifTable: 32-bit counters wrap
    p = ports[4]
    assert got[f"{IF}.10.{p.if_index}"] == str(p.in_octets % 2**32)
    assert got[f"{IF}.5.{p.if_index}"] == str(min(p.speed_bps, 2**32 - 1))
    assert got[f"{IF}.8.{p.if_index}"] == ("1" if p.oper_up else "2")


async def test_lldp_remote_table(agent: SnmpAgent, view: Tweaked) -> None:
    got = await bulkwalk(agent, SSP, LLDP_REM)
    neighbors = view.lldp(SSP)
    assert neighbors and len(got) == 6 * len(neighbors)
    for n in neighbors:
        idx = f"0.{n.local_if_index}.1"
        assert got[f"{LLDP_REM}.9.{idx}"] == n.system_name
        assert got[f"{LLDP_REM}.7.{idx}"] == n.port_id
        assert got[f"{LLDP_REM}.8.{idx}"] == n.port_description
        assert got[f"{LLDP_REM}.4.{idx}"] == "4"  # macAddress
        assert got[f"{LLDP_REM}.5.{idx}"] == hex_of(bytes.fromhex(n.chassis_id.replace(":", "")))


async def test_pfc_tables(agent: SnmpAgent, view: Tweaked) -> None:
    ieee = await bulkwalk(agent, SPINE, IEEE_PFC)
    cisco = await bulkwalk(agent, SPINE, CPFC)
    ports = ports_at_t0(view, SPINE)
    assert len(ieee) == 2 * 128 and len(cisco) == 2 * 128 + 2 * 8 * 128
    for p in ports:
        i = p.if_index
        assert ieee[f"{IEEE_PFC}.2.{i}"] == str(sum(p.pfc_tx) % 2**32)  # requests: sent
        assert ieee[f"{IEEE_PFC}.3.{i}"] == str(sum(p.pfc_rx) % 2**32)  # indications: received
        assert cisco[f"{CPFC}.1.1.1.{i}"] == str(sum(p.pfc_tx))
        assert cisco[f"{CPFC}.1.1.2.{i}"] == str(sum(p.pfc_rx))
        for prio in range(8):
            assert cisco[f"{CPFC}.2.1.2.{i}.{prio}"] == str(p.pfc_tx[prio])
            assert cisco[f"{CPFC}.2.1.3.{i}.{prio}"] == str(p.pfc_rx[prio])


async def test_snmpget_sys_up_time_and_hc_octets(agent: SnmpAgent, view: Tweaked) -> None:
    rc, out, err = await net_snmp(
        "snmpget",
        agent,
        "-v2c",
        "-c",
        SPINE,
        oids=["1.3.6.1.2.1.1.3.0", f"{IF_X}.6.7", "1.3.6.1.2.1.1.5.0", "1.3.6.1.2.1.1.9.0"],
    )
    assert rc == 0, err
    got = parse(out)
    info = view.switch(SPINE)
    assert info is not None
    assert got["1.3.6.1.2.1.1.3.0"] == str((T0 - info.boot_time_ns) // 10_000_000)
    assert got[f"{IF_X}.6.7"] == str(ports_at_t0(view, SPINE)[6].in_octets)
    assert got["1.3.6.1.2.1.1.5.0"] == SPINE
    assert got["1.3.6.1.2.1.1.9.0"].startswith("No Such Object")


async def test_whole_switch_walks_getnext_and_getbulk_agree(agent: SnmpAgent) -> None:
    rc, out, err = await net_snmp("snmpbulkwalk", agent, "-v2c", "-c", SPINE, "-Cr60", oids=["."])
    assert rc == 0 and clean(err), err
    bulk = parse(out)
    assert len(bulk) > 9000
    rc, out, err = await net_snmp("snmpwalk", agent, "-v2c", "-c", SPINE, oids=["1.0.8802"])
    assert rc == 0 and clean(err), err
    walked = parse(out)
    assert walked == {k: v for k, v in bulk.items() if k.startswith("1.0.8802.")}


async def test_v3_auth_priv_bulkwalk_and_get(agent: SnmpAgent, view: Tweaked) -> None:
    rc, out, err = await net_snmp("snmpbulkwalk", agent, *V3, "-n", SSP, "-Cr50", oids=[f"{IF_X}.6"])
    assert rc == 0 and clean(err), err
    got = parse(out)
    assert got == {f"{IF_X}.6.{p.if_index}": str(p.in_octets) for p in ports_at_t0(view, SSP)}
    rc, out, err = await net_snmp("snmpget", agent, *V3, "-n", SPINE, oids=["1.3.6.1.2.1.1.5.0"])
    assert rc == 0 and parse(out) == {"1.3.6.1.2.1.1.5.0": SPINE}, err


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (["-A", "wrong-auth-key", "-X", "fabricmon-priv"], "Authentication failure"),
        (["-A", "fabricmon-auth", "-X", "wrong-priv-key"], "Decryption error"),
    ],
)
async def test_v3_wrong_keys_fail_with_usm_reports(agent: SnmpAgent, keys: list[str], message: str) -> None:
    rc, out, err = await net_snmp(
        "snmpget", agent, *V3_USER, *keys, "-n", SPINE, "-t", "2", "-r", "0", oids=["1.3.6.1.2.1.1.5.0"]
    )
    assert rc != 0 and message in err, (out, err)
    await still_serving(agent)


async def still_serving(agent: SnmpAgent) -> None:
    rc, out, _ = await net_snmp("snmpget", agent, "-v2c", "-c", SSP, oids=["1.3.6.1.2.1.1.5.0"])
    assert rc == 0 and parse(out) == {"1.3.6.1.2.1.1.5.0": SSP}
    rc, out, _ = await net_snmp("snmpget", agent, *V3, "-n", SSP, oids=["1.3.6.1.2.1.1.5.0"])
    assert rc == 0 and parse(out) == {"1.3.6.1.2.1.1.5.0": SSP}


async def test_wrong_community_and_unknown_context_time_out(agent: SnmpAgent) -> None:
    before = agent.stats.unknown_community, agent.stats.unknown_context
    quick = ["-t", "1", "-r", "0"]
    rc, _, err = await net_snmp("snmpget", agent, "-v2c", "-c", "public", *quick, oids=["1.3.6.1.2.1.1.5.0"])
    assert rc != 0 and "Timeout" in err
    rc, _, err = await net_snmp("snmpget", agent, *V3, "-n", "nosuch", *quick, oids=["1.3.6.1.2.1.1.5.0"])
    assert rc != 0 and "Timeout" in err
    assert (agent.stats.unknown_community, agent.stats.unknown_context) == (before[0] + 1, before[1] + 1)
    await still_serving(agent)


async def test_unreachable_switch_does_not_answer(agent: SnmpAgent, view: Tweaked) -> None:
    view.silenced.add(SPINE)
    try:
        quick = ["-t", "1", "-r", "0"]
        rc, _, err = await net_snmp("snmpget", agent, "-v2c", "-c", SPINE, *quick, oids=["1.3.6.1.2.1.1.5.0"])
        assert rc != 0 and "Timeout" in err
        rc, _, err = await net_snmp("snmpget", agent, *V3, "-n", SPINE, *quick, oids=["1.3.6.1.2.1.1.5.0"])
        assert rc != 0 and "Timeout" in err
        assert agent.stats.unreachable >= 1
    finally:
        view.silenced.clear()
    await still_serving(agent)


async def test_garbage_datagrams_are_ignored_and_counted(agent: SnmpAgent) -> None:
    before = agent.stats.malformed
    junk = [b"", b"\x00", b"\x30\x84\xff\xff\xff\xff", b"hello world", b"\x30\x03\x02\x01\x01", bytes(range(256))]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for data in junk:
            sock.sendto(data, ("127.0.0.1", agent.port))
    for _ in range(100):
        if agent.stats.malformed >= before + len(junk):
            break
        await asyncio.sleep(0.01)
    assert agent.stats.malformed == before + len(junk)
    await still_serving(agent)


async def test_small_response_budget_truncates_bulk_replies(view: Tweaked) -> None:
    small = await serve_snmp(view, "127.0.0.1", 0, max_response_bytes=1200, v3_users=())
    try:
        got = await bulkwalk(small, SPINE, "1.3.6.1.2.1.31.1.1", "-Cr1000")
        assert len(got) == 19 * 128
        assert small.stats.too_big == 0
        assert small.stats.responses > 20  # -Cr1000 would take 3 replies without the 1200-byte cap
    finally:
        await small.stop()


async def pysnmp_fetch(
    agent: SnmpAgent, auth: hlapi.CommunityData | hlapi.UsmUserData, context: bytes
) -> tuple[dict[tuple[int, ...], int], dict[tuple[int, ...], int]]:
    engine = hlapi.SnmpEngine()
    try:
        target = await hlapi.UdpTransportTarget.create(("127.0.0.1", agent.port), timeout=2, retries=1)
        ctx = hlapi.ContextData(contextName=context)
        err, status, _, vbs = await hlapi.get_cmd(
            engine, auth, target, ctx, hlapi.ObjectType(hlapi.ObjectIdentity("1.3.6.1.2.1.1.3.0")), lookupMib=False
        )
        assert err is None and not status, err
        scalars = {tuple(name): int(val) for name, val in vbs}
        column: dict[tuple[int, ...], int] = {}
        async for err, status, _, vbs in hlapi.walk_cmd(
            engine,
            auth,
            target,
            ctx,
            hlapi.ObjectType(hlapi.ObjectIdentity(f"{IF_X}.10")),
            lookupMib=False,
            lexicographicMode=False,
        ):
            assert err is None and not status, err
            column.update({tuple(name): int(val) for name, val in vbs})
        return scalars, column
    finally:
        engine.close_dispatcher()


@pytest.mark.parametrize(
    "make_auth",
    [
        lambda: (hlapi.CommunityData(SSP, mpModel=1), b""),
        lambda: (
            hlapi.UsmUserData(
                "fabricmon",
                "fabricmon-auth",
                "fabricmon-priv",
                authProtocol=hlapi.USM_AUTH_HMAC96_SHA,
                privProtocol=hlapi.USM_PRIV_CFB128_AES,
            ),
            SSP.encode(),
        ),
    ],
    ids=["v2c", "v3"],
)
async def test_pysnmp_client_reads_values(
    agent: SnmpAgent, view: Tweaked, make_auth: Callable[[], tuple[object, bytes]]
) -> None:
    auth, context = make_auth()
    scalars, column = await pysnmp_fetch(agent, auth, context)
    info = view.switch(SSP)
    assert info is not None
    assert scalars == {(1, 3, 6, 1, 2, 1, 1, 3, 0): (T0 - info.boot_time_ns) // 10_000_000}
    assert column == {(1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 10, p.if_index): p.out_octets for p in ports_at_t0(view, SSP)}


@pytest.mark.slow
async def test_v2c_fast_path_outruns_pysnmp_v3(agent: SnmpAgent) -> None:
    """Throughput of both paths (``pytest -m slow -s`` prints it): bulk walks of ifXTable."""
    rates = {}
    for label, auth in (("v2c", ["-v2c", "-c"]), ("v3", [*V3, "-n"])):
        start, total = asyncio.get_running_loop().time(), 0
        for switch in (SPINE, SSP, "sp-r2-1", "ssp-2"):
            rc, out, err = await net_snmp("snmpbulkwalk", agent, *auth, switch, "-Cr50", oids=[IF_X])
            assert rc == 0 and clean(err), err
            total += len(parse(out))
        rates[label] = total / (asyncio.get_running_loop().time() - start)
    print(f"varbinds/s: v2c fast path {rates['v2c']:,.0f}, v3 via pysnmp {rates['v3']:,.0f}")
    assert rates["v2c"] > 3 * rates["v3"]

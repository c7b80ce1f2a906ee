"""Short, garbage and oversized SNMP datagrams on real UDP sockets of loopback.

pysnmp's transport checks each datagram's frame (``plausible_snmp``) inside
``datagram_received``: it must never raise there (asyncio would log it per datagram, and the
garbage would go uncounted). gufo-snmp's walks tell an answer cut at gufo's 4,080-byte buffer
(walk again, asking fewer rows) from garbage (counted, skipped, the real answer awaited).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import SecretStr

from collector.oids import Column
from collector.snmp_client import SnmpError
from collector.snmp_gufo import RECV_BUFFER_BYTES, GufoClient
from collector.snmp_pysnmp import PysnmpClient, PysnmpEngines, plausible_snmp
from collector.targets import SwitchTarget
from tests.support.snmp_datagrams import ScriptedAgent, column_table, scripted_agent

IF_NAME = "1.3.6.1.2.1.31.1.1.1.1"
NAMES = [f"Ethernet{i}".encode() for i in range(1, 41)]

#: Frames that once raised IndexError in plausible_snmp: SEQUENCE of 2 or 3 bytes whose content
#: starts like the version INTEGER and stops there.
SHORT_FRAMES = [b"\x30\x81\x02\x02\x01", b"\x30\x82\x00\x02\x02\x01", b"\x30\x83\x00\x00\x02\x02\x01"]


@pytest.mark.parametrize("datagram", [*SHORT_FRAMES, b"", b"\x30", b"\x30\x84", b"\x30\x02\x02\x01"])
def test_plausible_snmp_is_total(datagram: bytes) -> None:
    assert plausible_snmp(datagram) is False


@contextlib.asynccontextmanager
async def loop_errors() -> AsyncIterator[list[dict[str, Any]]]:
    """What reaches the event loop's exception handler meanwhile."""
    loop = asyncio.get_running_loop()
    seen: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: seen.append(context))
    try:
        yield seen
    finally:
        loop.set_exception_handler(previous)


async def test_short_and_garbage_datagrams_to_pysnmp_are_counted_never_raised() -> None:
    """An agent that answers a GET with garbage: every datagram counted, none raises in the loop."""
    counted: Counter[str] = Counter()
    all_counted = asyncio.Event()
    garbage = [*SHORT_FRAMES, b"", b"\x30", os.urandom(64), b"\x30\x03\x02\x01\x00"]

    def count(what: str, n: int) -> None:
        counted[what] += n
        if counted.total() >= len(garbage):
            all_counted.set()

    agent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    agent.bind(("127.0.0.1", 0))
    agent.setblocking(False)
    engines = PysnmpEngines()
    address = f"127.0.0.1:{agent.getsockname()[1]}"
    target = SwitchTarget("s", "snmp", address, community=SecretStr("public"), timeout_s=2.0, retries=0)
    client = PysnmpClient(target, count, engines)
    try:
        async with loop_errors() as errors:
            get = asyncio.create_task(client.get(["1.3.6.1.2.1.1.3.0"]))
            loop = asyncio.get_running_loop()
            _, engine = await asyncio.wait_for(loop.sock_recvfrom(agent, 4096), 10)  # the GET
            for datagram in garbage:
                agent.sendto(datagram, engine)
            await asyncio.wait_for(all_counted.wait(), 5)
            await asyncio.sleep(0.05)  # anything late lands now
            get.cancel()
            with contextlib.suppress(asyncio.CancelledError, SnmpError):
                await get
        assert errors == [] and counted == {"datagram that is not SNMP": len(garbage)}
    finally:
        agent.close()
        engines.close()


def v2c(agent: ScriptedAgent, *, timeout_s: float = 0.5, retries: int = 1) -> SwitchTarget:
    return SwitchTarget("s", "snmp", agent.address, community=SecretStr("public"), timeout_s=timeout_s,
                        retries=retries)  # fmt: skip


async def walk(agent: ScriptedAgent, counted: Counter[str], **target: Any) -> dict[str, Any]:
    client = GufoClient(v2c(agent, **target), lambda what, n: counted.update({what: n}))
    try:
        walked = await client.walk([Column(IF_NAME, "name", "bytes", 64)])
        return walked.rows[0]
    finally:
        await client.close()
        agent.transport.close()


@pytest.mark.parametrize(
    "garbage",
    [os.urandom(60), b"\x30\x03\x02\x01\x01", b"\xff" * RECV_BUFFER_BYTES, SHORT_FRAMES[0]],
    ids=["random", "a bare SEQUENCE", "4080 bytes of 0xff", "short frame"],
)
async def test_garbage_during_a_walk_is_counted_not_read_as_a_cut_answer(garbage: bytes) -> None:
    """Each answer comes after a garbage datagram: the walk ends with every row, the garbage counted.
    It once read each as an answer cut at gufo's buffer and failed: "does not fit gufo-snmp's buffer"."""
    agent = await scripted_agent(column_table(IF_NAME, NAMES), before=lambda answer: [garbage])
    counted: Counter[str] = Counter()
    rows = await walk(agent, counted)
    assert rows == {str(i + 1): name for i, name in enumerate(NAMES)}
    assert counted == {"undecodable SNMP response": len(agent.sent)} and agent.sent


async def test_answers_larger_than_gufos_buffer_are_walked_again_smaller() -> None:
    """1,000-byte names: the first GETBULK's answer is cut; fewer rows are asked; nothing counted."""
    names = [f"{i:04d}".encode() * 250 for i in range(12)]
    agent = await scripted_agent(column_table(IF_NAME, names))
    counted: Counter[str] = Counter()
    rows = await walk(agent, counted)
    assert rows == {str(i + 1): name for i, name in enumerate(names)}
    assert counted == {}


async def test_a_row_larger_than_gufos_buffer_says_so() -> None:
    agent = await scripted_agent(column_table(IF_NAME, [b"x" * 5000]))
    counted: Counter[str] = Counter()
    with pytest.raises(SnmpError, match=f"a single row does not fit gufo-snmp's {RECV_BUFFER_BYTES}-byte"):
        await walk(agent, counted)
    assert counted == {}


async def test_only_garbage_is_no_response_with_the_garbage_said() -> None:
    agent = await scripted_agent(column_table(IF_NAME, NAMES), before=lambda a: [b"\x30\x00"], answer_real=False)
    counted: Counter[str] = Counter()
    with pytest.raises(SnmpError, match=r"no response .* \(2 tries; 2 undecodable datagram\(s\) skipped\)"):
        await walk(agent, counted, timeout_s=0.2)
    assert counted == {"undecodable SNMP response": 2}

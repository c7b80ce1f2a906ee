"""Fuzzing what parses SNMP responses: mutated real answers, on real UDP sockets of loopback.

The seed corpus is tests/fixtures/fuzz/snmp/: ``ok-*`` are answers of snmpsim serving
snmpsim-data's recordings of real switches (Arista, Cisco, Huawei, Juniper), ``bad-*``
datagrams that once broke a parser (``python -m tests.support.fuzz_corpus`` remakes them).
Three parsers meet these bytes: ``plausible_snmp`` (pysnmp's transport checks every datagram
with it), gufo-snmp's Rust decoder (through :class:`GufoClient`) and pysnmp's own. Whatever a
datagram holds, none raises anything but the client's own errors, and garbage is counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from collector.oids import Column
from collector.snmp_client import SnmpError
from collector.snmp_gufo import GufoClient
from collector.snmp_pysnmp import PysnmpClient, PysnmpEngines, plausible_snmp
from collector.targets import SwitchTarget
from tests.support.snmp_datagrams import Response, column_table, request_id_tlv, scripted_agent

CORPUS = Path(__file__).parents[2] / "fixtures" / "fuzz" / "snmp"
SEEDS = {p.name: p.read_bytes() for p in sorted(CORPUS.glob("*.bin"))}
OK = {name: data for name, data in SEEDS.items() if name.startswith("ok-")}
IF_NAME = "1.3.6.1.2.1.31.1.1.1.1"
TABLE = column_table(IF_NAME, [f"Ethernet{i}".encode() for i in range(1, 9)])
UNDECODABLE = "undecodable SNMP response"


def mutate(data: bytes, rnd: random.Random, times: int) -> bytes:
    """Bytes flipped, cut, inserted, lengths set to extremes, or spliced with another answer."""
    out = bytearray(data)
    for _ in range(times):
        at = rnd.randrange(len(out) + 1)
        kind = rnd.choice(["flip", "cut", "insert", "length", "splice"])
        if kind == "flip" and at < len(out):
            out[at] ^= 1 << rnd.randrange(8)
        elif kind == "cut":
            del out[at : at + rnd.randrange(1, 32)]
        elif kind == "insert":
            out[at:at] = rnd.randbytes(rnd.randrange(1, 8))
        elif kind == "length" and at < len(out):
            out[at] = rnd.choice([0x00, 0x7F, 0x80, 0x81, 0x84, 0x85, 0xFF])
        else:
            other = rnd.choice(list(SEEDS.values()))
            out[at:] = other[rnd.randrange(len(other) + 1) :]
    return bytes(out)


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_the_seed_corpus_frames_as_labelled(name: str) -> None:
    data = SEEDS[name]
    framed = plausible_snmp(data)  # a bad one may be framed well (a bare SEQUENCE) and still no answer
    if name.startswith("ok-"):
        assert framed and Response.parse(data).varbinds


def test_the_corpus_has_real_answers_of_four_vendors() -> None:
    assert {name.split("-")[1] for name in OK} == {"arista", "nx", "hw", "jn"}


@settings(max_examples=3000, deadline=None)
@given(st.sampled_from(sorted(SEEDS)), st.randoms(use_true_random=False), st.integers(1, 6))
def test_plausible_snmp_is_total_on_mutated_answers(name: str, rnd: random.Random, times: int) -> None:
    assert plausible_snmp(mutate(SEEDS[name], rnd, times)) in (True, False)


@settings(max_examples=1000, deadline=None)
@given(st.binary(max_size=16), st.binary(max_size=4))
def test_plausible_snmp_is_total_on_any_bytes(tail: bytes, head: bytes) -> None:
    assert plausible_snmp(b"\x30" + head + tail) in (True, False)


async def gufo_round(answers: Sequence[bytes], *, walk: bool) -> tuple[Any, Counter[str]]:
    """A GufoClient's GET (or walk) against an agent that sends ``answers`` (re-addressed to the
    request) before each real answer; what the client returned or raised, and what it counted."""
    counted: Counter[str] = Counter()

    def before(real: bytes) -> list[bytes]:
        rid = request_id_tlv(real)
        return [Response.parse(a).to(rid) if _parses(a) else a for a in answers]

    agent = await scripted_agent(TABLE, before=before)
    target = SwitchTarget("s", "snmp", agent.address, community=SecretStr("public"), timeout_s=0.3, retries=0)
    client = GufoClient(target, lambda what, n: counted.update({what: n}))
    try:
        if walk:
            got: Any = (await client.walk([Column(IF_NAME, "name", "bytes", 64)])).rows[0]
        else:
            got = await client.get([f"{IF_NAME}.1"])
    except SnmpError as exc:
        got = exc
    finally:
        await client.close()
        agent.transport.close()
    return got, counted


def _parses(data: bytes) -> bool:
    try:
        Response.parse(data)
    except (ValueError, IndexError):  # cut short
        return False
    return True


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(sorted(SEEDS)), st.randoms(use_true_random=False), st.integers(0, 4), st.booleans())
def test_gufo_survives_mutated_answers(name: str, rnd: random.Random, times: int, walk: bool) -> None:
    """A mutated real answer (carrying the request's id, so gufo decodes it) arrives before the real one:
    the client returns what it decoded, or the real answer after counting the garbage, or its own error."""
    mutant = Response.parse(SEEDS[name]).to(b"\x02\x01\x00") if name.startswith("ok-") else SEEDS[name]
    answers = [mutate(mutant, rnd, times) if times else mutant]
    got, counted = asyncio.run(gufo_round(answers, walk=walk))
    assert isinstance(got, dict | SnmpError), got
    assert set(counted) <= {UNDECODABLE} and counted[UNDECODABLE] <= 2 * len(answers) * 10
    if isinstance(got, dict):
        assert all(isinstance(v, int | bytes | str | float) for v in got.values())


def test_gufo_takes_the_real_answer_after_garbage_from_the_corpus() -> None:
    bad = [data for name, data in SEEDS.items() if name.startswith("bad-")]
    got, counted = asyncio.run(gufo_round(bad, walk=False))
    assert got == {f"{IF_NAME}.1": b"Ethernet1"}
    assert counted == {UNDECODABLE: len(bad) - 1}  # gufo reads an empty datagram as nothing (EAGAIN)


async def test_pysnmp_survives_mutated_answers() -> None:
    """600 mutated real answers (and the corpus's bad ones) to a pysnmp engine with a GET in flight:
    nothing reaches the event loop's exception handler; what is not framed like SNMP is counted."""
    rnd = random.Random(28)
    datagrams = [mutate(data, rnd, rnd.randrange(1, 5)) for data in list(OK.values()) * 30]
    datagrams += [data for name, data in SEEDS.items() if name.startswith("bad-")]
    unframed = sum(not plausible_snmp(d) for d in datagrams)
    counted: Counter[str] = Counter()
    done = asyncio.Event()

    def count(what: str, n: int) -> None:
        counted[what] += n
        if counted.total() >= unframed:
            done.set()

    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    agent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    agent.bind(("127.0.0.1", 0))
    agent.setblocking(False)
    engines = PysnmpEngines()
    target = SwitchTarget("s", "snmp", f"127.0.0.1:{agent.getsockname()[1]}", community=SecretStr("public"),
                          timeout_s=3.0, retries=0)  # fmt: skip
    client = PysnmpClient(target, count, engines)
    try:
        get = asyncio.create_task(client.get(["1.3.6.1.2.1.1.3.0"]))
        _, engine = await asyncio.wait_for(loop.sock_recvfrom(agent, 4096), 10)
        for datagram in datagrams:
            agent.sendto(datagram, engine)
            await asyncio.sleep(0)
        await asyncio.wait_for(done.wait(), 10)
        await asyncio.sleep(0.1)  # what pysnmp decodes after its frame check lands now
        get.cancel()
        with contextlib.suppress(asyncio.CancelledError, SnmpError):
            await get
    finally:
        loop.set_exception_handler(previous)
        agent.close()
        engines.close()
    assert errors == [], errors[:3]
    assert counted == {"datagram that is not SNMP": unframed} and unframed > 10

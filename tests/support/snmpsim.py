"""snmpsim serving snmpsim-data's recordings of real devices, on a UDP port of loopback.

snmpsim runs as a subprocess. It imports ``pysmi`` only to print its version, and a ``pysmi``
installed beside pysnmp makes pysnmp import pysmi's deprecated names (a DeprecationWarning,
an error under our pytest settings), so the subprocess gets a stand-in module instead.

Each recording is served to the v2c community named like its file: ``{"self": path}`` serves
``path`` to the empty community and to SNMPv3 with an empty context name (snmpsim's label for
its own engine id), ``{"nx": path}`` to the community ``nx``.
"""

from __future__ import annotations

import asyncio
import bz2
import contextlib
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from pydantic import SecretStr

from collector.snmp_client import SnmpTimeout
from collector.snmp_gufo import GufoClient
from collector.targets import SwitchTarget
from tests.support.ports import free_port

_LAUNCH = (
    "import sys, types; sys.modules['pysmi'] = types.SimpleNamespace(__version__='n/a'); "
    "from snmpsim.commands.responder import main; sys.exit(main())"
)


def recording(relative: str) -> Path | None:
    """snmpsim-data's ``data/<relative>``, or None when snmpsim or snmpsim-data is not installed."""
    spec = importlib.util.find_spec("snmpsim_data")
    if spec is None or not spec.submodule_search_locations or importlib.util.find_spec("snmpsim") is None:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / relative
    return path if path.exists() else None


def parse_snmprec(path: Path) -> dict[str, int | bytes | str]:
    """``oid|tag|value`` lines → OID → value (integers as int, strings as bytes)."""
    out: dict[str, int | bytes | str] = {}
    with bz2.open(path, "rt", encoding="latin-1") as f:
        lines = f.read().splitlines()
    for line in lines:
        oid, tag, value = line.split("|", 2) if line.count("|") >= 2 else (line, "", "")
        if tag in {"2", "65", "66", "67", "70"}:
            out[oid] = int(value)
        elif tag == "4":
            out[oid] = value.encode("latin-1")
        elif tag == "4x":
            out[oid] = bytes.fromhex(value)
        elif tag:
            out[oid] = value
    return out


def column(rec: Mapping[str, int | bytes | str], prefix: str) -> dict[str, int | bytes | str]:
    """The rows of one table column: index (the OID past ``prefix``) → value."""
    p = prefix + "."
    return {oid[len(p) :]: v for oid, v in rec.items() if oid.startswith(p)}


@contextlib.contextmanager
def serving(
    recordings: Mapping[str, Path], base: Path, extra_args: Sequence[str] = (), subtrees: Sequence[str] = ()
) -> Iterator[str]:
    """snmpsim serving each recording to its community; yields ``127.0.0.1:<port>``.

    ``subtrees`` (OID prefixes) keeps only those parts of each recording: a router's 650,000
    records take snmpsim minutes to index, the MIBs the collector walks a second."""
    data = base / "data"
    data.mkdir(parents=True)
    prefixes = tuple((t.rstrip(".") + ".").encode() for t in subtrees)
    for community, path in recordings.items():
        # uncompressed: snmpsim seeks to each record, and seeking in a .bz2 decompresses from the start
        with bz2.open(path) as src, (data / f"{community}.snmprec").open("wb") as dst:
            if prefixes:
                dst.writelines(line for line in src if line.startswith(prefixes))
            else:
                shutil.copyfileobj(src, dst)
    port = free_port(socket.SOCK_DGRAM)
    cmd = [sys.executable, "-c", _LAUNCH, f"--data-dir={data}", f"--cache-dir={base / 'cache'}",
           f"--agent-udpv4-endpoint=127.0.0.1:{port}", "--logging-method=null", *extra_args]  # fmt: skip
    env = {**os.environ, "SNMPSIM_ALLOW_ROOT": "true"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        address = f"127.0.0.1:{port}"
        first = next(iter(recordings))
        asyncio.run(_wait_ready(address, "" if first == "self" else first, proc))
        yield address
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


async def _wait_ready(address: str, community: str, proc: subprocess.Popen[bytes]) -> None:
    target = SwitchTarget("self", "snmp", address, community=SecretStr(community), timeout_s=0.5, retries=0)
    client = GufoClient(target, lambda what, n: None)
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise RuntimeError(f"snmpsim exited with {proc.returncode}: {err[-2000:]}")
        try:
            if await client.get(["1.3.6.1.2.1.1.3.0"]):
                return
        except SnmpTimeout:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("snmpsim did not answer within 60 s")
        await asyncio.sleep(0.2)

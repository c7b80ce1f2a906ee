"""Our HTTP/2 client against a gNMI server built with grpc-go (issue 28): the HTTP/2 stack most
switches' gNMI servers run (SONiC, Arista, Nokia SR Linux, Cisco's gnmi-gateway are Go).

tests/interop/gnmi_go/main.go serves gnmi.gNMI/Subscribe with a codec that passes bytes
through, streaming recorded SubscribeResponses (Telegraf's captures of real devices) and ending
with OK. It is built here from Debian's packages (golang-go, golang-google-grpc-dev: see
scripts/setup-system.sh), offline, in GOPATH mode. Slow: the build takes ~10 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import ipaddress
import os
import shutil
import struct
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from pygnmi.spec.v080 import gnmi_pb2

from collector.config import PLAINTEXT, TlsConfig
from collector.gnmi_settings import GnmiTuning
from collector.gnmi_transport import H2Channel
from tests.support.captures import TELEGRAF, serialized, telegraf_case
from wire import grpc_h2

pytestmark = [pytest.mark.slow, pytest.mark.asyncio]
SOURCE = Path(__file__).resolve().parents[1] / "interop" / "gnmi_go"
GOPATH = Path("/usr/share/gocode")  # where Debian's Go library packages install their sources
REPEAT = 200
REQUEST = gnmi_pb2.SubscribeRequest(subscribe=gnmi_pb2.SubscriptionList(prefix=gnmi_pb2.Path(target="x")))


@pytest.fixture(scope="module")
def server_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    go = shutil.which("go")
    if go is None or not (GOPATH / "src" / "google.golang.org" / "grpc").is_dir():
        pytest.skip("Go and grpc-go are not installed (scripts/setup-system.sh installs them)")
    out = tmp_path_factory.mktemp("gnmi_go") / "gnmi_go"
    # GOPATH mode against Debian's sources: nothing is fetched (GOPROXY off), no module is resolved
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": str(GOPATH), "GOCACHE": str(out.parent / "cache"),
           "GOPROXY": "off", "CGO_ENABLED": "0"}  # fmt: skip
    subprocess.run([go, "build", "-o", str(out), "."], cwd=SOURCE, env=env, check=True, timeout=300)
    return out


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[bytes]]:
    """Every Telegraf capture's responses, as bytes and as the server's file (length, bytes; repeated)."""
    responses = [raw for case in sorted(p.name for p in TELEGRAF.iterdir()) for raw in serialized(telegraf_case(case))]
    path = tmp_path_factory.mktemp("recorded") / "responses.bin"
    path.write_bytes(b"".join(struct.pack(">I", len(r)) + r for r in responses))
    return path, responses


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(CA file, server certificate, its key): a certificate for "switch.example" only, as many switches have."""
    root = tmp_path_factory.mktemp("pki")
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)

    def build(subject: str, public: ec.EllipticCurvePublicKey, ca: bool) -> x509.Certificate:
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
        issuer = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fabricmon test CA")])
        builder = (
            x509.CertificateBuilder().subject_name(name).issuer_name(issuer).public_key(public)
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )  # fmt: skip
        if not ca:
            sans = [x509.DNSName("switch.example"), x509.IPAddress(ipaddress.ip_address("10.0.0.1"))]
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return builder.sign(ca_key, hashes.SHA256())

    pem = serialization.Encoding.PEM
    (root / "ca.pem").write_bytes(build("fabricmon test CA", ca_key.public_key(), True).public_bytes(pem))
    (root / "cert.pem").write_bytes(build("switch.example", key.public_key(), False).public_bytes(pem))
    (root / "key.pem").write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return root / "ca.pem", root / "cert.pem", root / "key.pem"


@contextlib.asynccontextmanager
async def go_server(binary: Path, responses: Path, *tls: str) -> AsyncIterator[int]:
    proc = await asyncio.create_subprocess_exec(
        str(binary), "-responses", str(responses), "-repeat", str(REPEAT), *tls, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        assert line.startswith(b"port "), line
        yield int(line.split()[1])
    finally:
        proc.terminate()
        await proc.wait()


async def subscribe_all(channel: H2Channel) -> list[bytes]:
    call = await channel.subscribe((("username", "ops"),))
    await call.write(REQUEST.SerializeToString())
    got: list[bytes] = []
    async with asyncio.timeout(60):
        while batch := await call.read_batch():
            got += batch
    return got


async def test_every_recorded_response_arrives_intact_from_grpc_go(
    server_binary: Path, recorded: tuple[Path, list[bytes]]
) -> None:
    path, responses = recorded
    async with go_server(server_binary, path) as port:
        channel = H2Channel(f"127.0.0.1:{port}", PLAINTEXT, GnmiTuning())
        try:
            got = await subscribe_all(channel)
            again = await subscribe_all(channel)  # a second call on the same connection
            assert channel.connections == 1
        finally:
            await channel.close()
    assert got == responses * REPEAT and again == got
    assert all(gnmi_pb2.SubscribeResponse.FromString(r) for r in got[: len(responses)])


async def test_grpc_go_sees_our_metadata_and_answers_on_our_own_connection(
    server_binary: Path, recorded: tuple[Path, list[bytes]]
) -> None:
    path, responses = recorded
    async with go_server(server_binary, path) as port:
        conn = await grpc_h2.connect("127.0.0.1", port, keepalive_s=0)
        try:
            stream = conn.open("/gnmi.gNMI/Subscribe", (("username", "ops"),))
            await stream.write(REQUEST.SerializeToString())
            first = await asyncio.wait_for(stream.read_batch(), 10)
            assert stream.headers is not None and stream.headers.get("seen-username") == "ops"
            rest: list[bytes] = []
            while batch := await asyncio.wait_for(stream.read_batch(), 30):
                rest += batch
        finally:
            conn.close()
    assert first + rest == responses * REPEAT


async def test_grpc_go_over_tls_with_a_server_name_override(
    server_binary: Path, recorded: tuple[Path, list[bytes]], certs: tuple[Path, Path, Path]
) -> None:
    path, responses = recorded
    ca, cert, key = certs
    async with go_server(server_binary, path, "-cert", str(cert), "-key", str(key)) as port:
        tls = TlsConfig(enabled=True, ca_file=ca, server_name="switch.example")  # we dial 127.0.0.1
        channel = H2Channel(f"127.0.0.1:{port}", tls, GnmiTuning())
        try:
            got = await subscribe_all(channel)
        finally:
            await channel.close()
    assert got == responses * REPEAT

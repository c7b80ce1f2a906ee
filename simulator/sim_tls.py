"""The simulator's TLS material: a CA of its own, and a server certificate it signs at each start.

``fabricmon sim`` serves gNMI over TLS by default (SPEC §10.6). The CA is made once per
directory and kept (``ca.pem``, ``ca.key``), so collectors configured with its ``ca.pem`` keep
trusting a simulator that restarts; the server certificate (``server.pem``, ``server.key``) is
issued afresh at every start for the names the simulator is reached by (the listen host,
``localhost``, ``127.0.0.1``, ``::1``, the machine's host name and any ``--tls-name``).

Two simulators started at once on one directory agree on one CA: it is written to a temporary
directory and renamed into place, and the loser of that race loads the winner's. Each serves the
certificate it issued from memory; the pair on disk is for people (``openssl x509 -in``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import os
import shutil
import socket
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from simulator.gnmi_server import GnmiTls

CA_DIR = "ca"
CA_CERT, CA_KEY = "ca.pem", "ca.key"
SERVER_CERT, SERVER_KEY = "server.pem", "server.key"
#: The CA outlives many restarts; a server certificate only one run (re-issued at every start).
CA_DAYS, SERVER_DAYS = 3650, 825
_ALWAYS = ("localhost", "127.0.0.1", "::1")
_CA_USAGE = x509.KeyUsage(
    digital_signature=True,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    key_cert_sign=True,
    crl_sign=True,
    encipher_only=False,
    decipher_only=False,
)


@dataclass(frozen=True, slots=True)
class SimTls:
    """Where the simulator's TLS files are, and the server's material for :func:`serve_gnmi`."""

    ca_file: Path
    cert_file: Path
    key_file: Path
    server: GnmiTls
    names: tuple[str, ...]


def default_tls_dir(write_config: Path | None) -> Path:
    """Beside the written config (``sim-tls/``), else the user's cache directory."""
    if write_config is not None:
        return write_config.resolve().parent / "sim-tls"
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "fabricmon" / "sim-tls"


def server_names(host: str, extra: Iterable[str] = ()) -> tuple[str, ...]:
    """The names a server certificate for a listener on ``host`` carries (no duplicates, in order)."""
    names: list[str] = []
    for name in (host, *_ALWAYS, socket.gethostname(), *extra):
        name = name.strip("[]")
        if name and name not in ("0.0.0.0", "::") and name not in names:
            names.append(name)
    return tuple(names)


def prepare(directory: Path, names: Iterable[str]) -> SimTls:
    """The CA of ``directory`` (made on first use) and a fresh server certificate for ``names``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_cert, ca_key = _ca(directory)
    wanted = tuple(names)
    cert_pem, key_pem = _issue(ca_cert, ca_key, wanted)
    cert_file, key_file = directory / SERVER_CERT, directory / SERVER_KEY
    _write(key_file, key_pem, 0o600)
    _write(cert_file, cert_pem, 0o644)
    return SimTls(
        ca_file=directory / CA_DIR / CA_CERT,
        cert_file=cert_file,
        key_file=key_file,
        server=GnmiTls(cert_chain=cert_pem, private_key=key_pem),
        names=wanted,
    )


def _ca(directory: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    home = directory / CA_DIR
    if not (home / CA_CERT).exists():
        staging = Path(tempfile.mkdtemp(prefix=".ca-", dir=directory))
        try:
            made, made_key = _make_ca()
            _write(staging / CA_KEY, _key_pem(made_key), 0o600)
            _write(staging / CA_CERT, made.public_bytes(serialization.Encoding.PEM), 0o644)
            staging.chmod(0o755)
            os.rename(staging, home)  # atomic; fails if another simulator's CA got there first
        except OSError:
            if not (home / CA_CERT).exists():
                raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    cert = x509.load_pem_x509_certificate((home / CA_CERT).read_bytes())
    key = serialization.load_pem_private_key((home / CA_KEY).read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{home / CA_KEY}: not the EC key fabricmon sim makes")
    return cert, key


def _make_ca() -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"fabricmon simulator CA ({socket.gethostname()})")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_CA_USAGE, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _issue(
    ca_cert: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, names: tuple[str, ...]
) -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = []
    for name in names:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            sans.append(x509.DNSName(name))
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0] if names else "localhost")]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=SERVER_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    pkcs8, clear = serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    return key.private_bytes(serialization.Encoding.PEM, pkcs8, clear)


def _write(path: Path, data: bytes, mode: int) -> None:
    """Atomically, with ``mode`` from the start (a key is never readable by others, even briefly)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # 0600, a name of its own
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise

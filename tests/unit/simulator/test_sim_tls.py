"""The simulator's CA and server certificate (simulator/sim_tls.py)."""

from __future__ import annotations

import ipaddress
import stat
import threading
from pathlib import Path

from cryptography import x509

from simulator.sim_tls import default_tls_dir, prepare, server_names


def _sans(pem: bytes) -> list[str]:
    cert = x509.load_pem_x509_certificate(pem)
    ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return [*ext.get_values_for_type(x509.DNSName), *(str(a) for a in ext.get_values_for_type(x509.IPAddress))]


def test_the_ca_is_made_once_and_signs_a_fresh_server_certificate_at_each_start(tmp_path: Path) -> None:
    first = prepare(tmp_path, ("127.0.0.1", "localhost", "gnmi.lab"))
    ca_pem = first.ca_file.read_bytes()
    second = prepare(tmp_path, ("127.0.0.1", "localhost"))
    assert second.ca_file == first.ca_file and second.ca_file.read_bytes() == ca_pem  # collectors keep trusting it
    assert second.server.cert_chain != first.server.cert_chain
    ca = x509.load_pem_x509_certificate(ca_pem)
    for issued in (first, second):
        x509.load_pem_x509_certificate(issued.server.cert_chain).verify_directly_issued_by(ca)
    assert second.cert_file.read_bytes() == second.server.cert_chain  # the latest start's, on disk
    assert sorted(_sans(first.server.cert_chain)) == ["127.0.0.1", "gnmi.lab", "localhost"]
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


def test_private_keys_are_readable_by_their_owner_only(tmp_path: Path) -> None:
    tls = prepare(tmp_path, ("localhost",))
    for key in (tls.key_file, tmp_path / "ca" / "ca.key"):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600


def test_simulators_starting_together_agree_on_one_ca(tmp_path: Path) -> None:
    results: list[bytes] = []

    def start() -> None:
        tls = prepare(tmp_path, ("localhost",))
        x509.load_pem_x509_certificate(tls.server.cert_chain).verify_directly_issued_by(
            x509.load_pem_x509_certificate(tls.ca_file.read_bytes())
        )
        results.append(tls.ca_file.read_bytes())

    threads = [threading.Thread(target=start) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 6 and len(set(results)) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ca", "server.key", "server.pem"]  # no staging left


def test_names_cover_the_listen_host_and_the_local_ones() -> None:
    names = server_names("0.0.0.0", ["simulator", "localhost"])
    assert "0.0.0.0" not in names and names[:3] == ("localhost", "127.0.0.1", "::1") and "simulator" in names
    assert len(names) == len(set(names))
    assert server_names("[::1]")[0] == "::1" and ipaddress.ip_address(server_names("10.1.2.3")[0])


def test_the_tls_dir_sits_beside_the_written_config(tmp_path: Path) -> None:
    assert default_tls_dir(tmp_path / "sim.yaml") == tmp_path.resolve() / "sim-tls"
    assert default_tls_dir(None).parts[-2:] == ("fabricmon", "sim-tls")

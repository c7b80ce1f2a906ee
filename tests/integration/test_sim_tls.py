"""A fresh install talks TLS to the simulator (SPEC §10.6): ``fabricmon sim`` serves gNMI over TLS
with a CA of its own, the config it writes trusts that CA, and the collector verifies the switch.

Plaintext is the ``--plaintext`` simulator with a config that says ``insecure: true``; a target's
``tls.server_name`` checks a certificate issued for another name than the address's host.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from collector.config import TlsConfig
from collector.records import TargetState
from collector.targets import SwitchTarget, resolve_targets
from config.loader import load_config
from fabric.model import FabricParams
from fabric.topology import build_aipod
from simulator.runner import SimOptions, start_sim, stop_sim
from tests.integration.test_collector_gnmi import RecordingSink, collecting
from tests.support.sim_process import started_sim
from tests.support.waiting import until

PARAMS = FabricParams(gpus=64, radix=16)
FABRIC = build_aipod(PARAMS)
SIM_ARGS = (
    "--gpus",
    "64",
    "--radix",
    "16",
    "--protocols",
    "gnmi",
    "--gnmi",
    "127.0.0.1:0",
    "--snmp",
    "",
    "--control",
    "",
)
BOTH_TRANSPORTS = pytest.mark.parametrize("transport", ["h2", "grpc"])


def _pem(path: str) -> bytes:
    return Path(path).read_bytes()


def _leaves(targets: list[SwitchTarget]) -> list[str]:
    return [t.switch for t in targets if t.protocol == "gnmi"]


@BOTH_TRANSPORTS
async def test_a_fresh_install_collects_over_tls_from_the_simulator(
    tmp_path: Path, transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    with started_sim(tmp_path, SIM_ARGS, len(FABRIC.switches)) as sim:
        config = load_config(tmp_path / "sim.yaml", env={})
        (entry,) = config.targets
        assert entry.tls.enabled and not entry.insecure and entry.tls.ca_file is not None
        assert entry.tls.ca_file == Path(sim.ready["tls_ca"]) and entry.tls.ca_file.is_file()
        assert entry.tls.ca_file.is_relative_to(tmp_path)  # beside the written config
        targets, _ = resolve_targets(config.targets, FABRIC)
        sink = RecordingSink()
        with caplog.at_level(logging.WARNING):
            async with collecting(targets, sink, transport=transport) as collector:
                leaves = _leaves(targets)
                await until(lambda: all(sink.state(s) is TargetState.CONNECTED for s in leaves), 20, "TLS streams")
                await until(lambda: {r.switch for r in sink.ports} >= set(leaves), 10, "readings from every leaf")
        assert collector.plaintext_warnings == [] and "plaintext" not in caplog.text


async def test_the_simulator_restarts_with_the_ca_its_collectors_trust(tmp_path: Path) -> None:
    with started_sim(tmp_path, SIM_ARGS, len(FABRIC.switches)) as sim:
        ca = _pem(sim.ready["tls_ca"])
    with started_sim(tmp_path, SIM_ARGS, len(FABRIC.switches)) as again:
        assert _pem(again.ready["tls_ca"]) == ca
        targets, _ = resolve_targets(load_config(tmp_path / "sim.yaml", env={}).targets, FABRIC)
        sink = RecordingSink()
        async with collecting(targets[:1], sink):
            await until(lambda: sink.state(targets[0].switch) is TargetState.CONNECTED, 20, "TLS stream")


async def test_plaintext_is_asked_for_twice_and_warned_about_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with started_sim(tmp_path, (*SIM_ARGS, "--plaintext"), len(FABRIC.switches)) as sim:
        assert sim.ready["tls_ca"] is None and not (tmp_path / "sim-tls").exists()
        config = load_config(tmp_path / "sim.yaml", env={})
        (entry,) = config.targets
        assert not entry.tls.enabled and entry.insecure
        targets, _ = resolve_targets(config.targets, FABRIC)
        leaves = _leaves(targets)
        sink = RecordingSink()
        with caplog.at_level(logging.WARNING, logger="collector.targets"):
            async with collecting(targets, sink):
                await until(lambda: all(sink.state(s) is TargetState.CONNECTED for s in leaves), 20, "streams")
        warnings = [r.getMessage() for r in caplog.records if r.name == "collector.targets"]
        assert len(warnings) == 1 and warnings[0].startswith(
            f"targets[0]: gNMI in plaintext (insecure: true) to {len(leaves)} "
        )
        # The TLS default against this plaintext simulator never connects.
        tls_target = resolve_targets([entry.model_copy(update={"tls": TlsConfig(), "insecure": False})], FABRIC)[0][0]
        tls_sink = RecordingSink()
        async with collecting([tls_target], tls_sink):
            await until(lambda: tls_sink.state(tls_target.switch) in (TargetState.UNREACHABLE, TargetState.ERROR), 10)
        assert TargetState.CONNECTED not in tls_sink.history(tls_target.switch)


@BOTH_TRANSPORTS
async def test_server_name_checks_a_certificate_issued_for_another_name(tmp_path: Path, transport: str) -> None:
    sim = await start_sim(
        SimOptions(params=PARAMS, gnmi="127.0.0.1:0", snmp=None, control=None, tls_dir=tmp_path, tls_names=("sw.lab",))
    )
    try:
        assert sim.gnmi is not None and sim.tls is not None
        address = f"127.0.0.1:{sim.gnmi.port}"
        leaf = sorted(FABRIC.switches)[0]

        def target(name: str, server_name: str | None) -> SwitchTarget:
            tls = TlsConfig(ca_file=sim.tls.ca_file if sim.tls else None, server_name=server_name)
            return SwitchTarget(name, "gnmi", address, gnmi_target=leaf, tls=tls)

        sink = RecordingSink()
        targets = [target("by-ip", None), target("by-name", "sw.lab"), target("wrong-name", "other.lab")]
        async with collecting(targets, sink, transport=transport):
            await until(lambda: sink.state("by-ip") is TargetState.CONNECTED, 10, "the IP in the certificate")
            await until(lambda: sink.state("by-name") is TargetState.CONNECTED, 10, "server_name override")
            await until(lambda: sink.state("wrong-name") in (TargetState.ERROR, TargetState.UNREACHABLE), 10)
        assert TargetState.CONNECTED not in sink.history("wrong-name")
        assert "verif" in (sink.detail("wrong-name") or "").lower()  # CERTIFICATE_VERIFY_FAILED / Verification
    finally:
        await stop_sim(sim)

"""SPEC §10.6: gNMI over TLS unless plaintext is asked for twice; no credentials in plaintext unless allowed."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import SecretStr, ValidationError

from collector.config import PLAINTEXT, CollectorConfig, TargetConfig, TlsConfig
from collector.gnmi import GnmiCollector
from collector.targets import SwitchTarget, check_credentials, plaintext_warnings, resolve_targets
from config.errors import ConfigError
from config.loader import load_config
from config.model import Config
from fabric.model import FabricParams
from fabric.topology import build_aipod
from simulator.nos import Nos
from simulator.sim_config import sim_config
from tests.support.sinks import NullSink

FABRIC = build_aipod(FabricParams(gpus=64, radix=16))


def gnmi(**kw: Any) -> TargetConfig:
    return TargetConfig.model_validate({"switches": ["lf-*"], "protocol": "gnmi", "address": "h:57400", **kw})


def load(tmp_path: Path, target: str) -> Config:
    path = tmp_path / "fabricmon.yaml"
    path.write_text("targets:\n  - switches: [lf-*]\n    protocol: gnmi\n    address: h:57400\n" + target)
    return load_config(path, env={})


def test_tls_with_verification_is_the_default_for_gnmi() -> None:
    entry = gnmi()
    assert entry.tls.enabled and not entry.insecure and entry.tls.ca_file is None  # the system's CAs
    assert TlsConfig().enabled and SwitchTarget("s", "gnmi", "h:1").tls.enabled


def test_plaintext_without_insecure_is_an_error_naming_the_target(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load(tmp_path, "    tls: {enabled: false}\n")
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 'fabricmon.yaml'}:2: targets[0]:")
    assert "gNMI target lf-*" in message and "insecure: true" in message


def test_plaintext_asked_for_twice_loads(tmp_path: Path) -> None:
    config = load(tmp_path, "    tls: {enabled: false}\n    insecure: true\n")
    assert not config.targets[0].tls.enabled and config.targets[0].insecure


def test_insecure_alone_does_not_turn_verification_off(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'insecure: true' means plaintext and needs 'tls: \{enabled: false\}'"):
        load(tmp_path, "    insecure: true\n")


@pytest.mark.parametrize(
    "credentials", ["    username: ops\n", "    password: s3cret\n", "    username: ops\n    password: s3cret\n"]
)
def test_credentials_over_plaintext_are_refused_unless_allowed(tmp_path: Path, credentials: str) -> None:
    plaintext = "    tls: {enabled: false}\n    insecure: true\n"
    with pytest.raises(ConfigError, match=r"would travel in plaintext.*allow_plaintext_credentials: true"):
        load(tmp_path, plaintext + credentials)
    allowed = load(tmp_path, plaintext + credentials + "    allow_plaintext_credentials: true\n")
    assert allowed.targets[0].allow_plaintext_credentials
    assert load(tmp_path, credentials).targets[0].tls.enabled  # over TLS: nothing to allow


def test_snmp_targets_are_not_held_to_gnmi_transport_rules() -> None:
    entry = TargetConfig.model_validate(
        {"switches": ["sp-*"], "protocol": "snmp", "address": "h:161", "community": "c", "tls": {"enabled": False}}
    )
    assert entry.protocol == "snmp"


@given(
    enabled=st.booleans(),
    insecure=st.booleans(),
    username=st.booleans(),
    password=st.booleans(),
    allow=st.booleans(),
)
def test_a_gnmi_target_loads_exactly_when_the_rules_allow_it(
    enabled: bool, insecure: bool, username: bool, password: bool, allow: bool
) -> None:
    data: dict[str, Any] = {"tls": {"enabled": enabled}, "insecure": insecure, "allow_plaintext_credentials": allow}
    data.update({"username": "ops"} if username else {}, **({"password": "pw"} if password else {}))
    plaintext_asked = not enabled and insecure
    legal = (enabled and not insecure) or (plaintext_asked and (allow or not (username or password)))
    try:
        entry = gnmi(**data)
    except ValidationError:
        assert not legal
    else:
        assert legal and entry.tls.enabled == enabled


def test_server_name_is_per_target_and_reaches_the_switch_target() -> None:
    entries = [
        gnmi(switches=["lf-g1-r1"], tls={"server_name": "10.0.0.7", "ca_file": "/etc/fabricmon/ca.pem"}),
        gnmi(),
    ]
    targets, _ = resolve_targets(entries, FABRIC)
    by = {t.switch: t for t in targets}
    assert by["lf-g1-r1"].tls.server_name == "10.0.0.7" and by["lf-g1-r1"].tls.enabled
    assert by["lf-g1-r2"].tls.server_name is None and by["lf-g1-r2"].entry == "targets[1]"


def test_server_name_may_name_each_switch() -> None:
    (target,) = resolve_targets([gnmi(switches=["lf-g1-r1"], tls={"server_name": "{switch}.mgmt.lab"})], FABRIC)[0]
    assert target.tls.server_name == "lf-g1-r1.mgmt.lab"
    with pytest.raises(ConfigError, match=r"targets\[0\]\.tls\.server_name: switch lf-g1-r1 has no inventory field"):
        resolve_targets([gnmi(switches=["lf-g1-r1"], tls={"server_name": "{nothing}"})], FABRIC)


def test_credentials_never_reach_plaintext_metadata_from_code_built_targets() -> None:
    plain = SwitchTarget("s", "gnmi", "h:1", tls=PLAINTEXT, username="ops", password=SecretStr("pw"))
    with pytest.raises(ConfigError, match="gNMI target s: username/password would travel in plaintext"):
        check_credentials(plain)
    with pytest.raises(ConfigError):
        GnmiCollector([plain], NullSink(), CollectorConfig())
    check_credentials(SwitchTarget("s", "gnmi", "h:1", username="ops", password=SecretStr("pw")))  # TLS
    check_credentials(SwitchTarget("s", "gnmi", "h:1", tls=PLAINTEXT, username="ops", allow_plaintext_credentials=True))


def test_one_warning_per_plaintext_entry_at_start(caplog: pytest.LogCaptureFixture) -> None:
    plain = {"tls": {"enabled": False}, "insecure": True}
    entries = [
        gnmi(switches=["lf-g1-r1", "lf-g1-r2"], **plain),
        gnmi(switches=["lf-g1-r3"]),
        gnmi(switches=["lf-*"], **plain),
    ]
    targets, _ = resolve_targets(entries, FABRIC)
    with caplog.at_level(logging.WARNING, logger="collector.targets"):
        collector = GnmiCollector(targets, NullSink(), CollectorConfig())
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == collector.plaintext_warnings and len(warnings) == 2
    assert warnings[0].startswith("targets[0]: gNMI in plaintext (insecure: true) to 2 switches (lf-g1-r1, lf-g1-r2)")
    assert warnings[1].startswith("targets[2]: gNMI in plaintext (insecure: true) to 5 switches (lf-g1-r4, ")
    assert plaintext_warnings([t for t in targets if t.tls.enabled]) == []


def test_sim_config_trusts_the_simulators_ca_or_says_plaintext_twice() -> None:
    nos = {"lf-g1-r1": Nos.SONIC, "lf-g1-r2": Nos.OPENCONFIG}
    tls = sim_config(gnmi_address="127.0.0.1:9339", snmp_address="127.0.0.1:1161", nos=nos, ca_file=Path("/x/ca.pem"))
    plain = sim_config(gnmi_address="127.0.0.1:9339", snmp_address="127.0.0.1:1161", nos=nos)
    gnmi_tls = [t for t in tls["targets"] if t["protocol"] == "gnmi"]
    gnmi_plain = [t for t in plain["targets"] if t["protocol"] == "gnmi"]
    assert all(t["tls"] == {"ca_file": "/x/ca.pem"} and "insecure" not in t for t in gnmi_tls)
    assert all(t["tls"] == {"enabled": False} and t["insecure"] for t in gnmi_plain)
    sonic = next(t for t in gnmi_plain if t.get("profile") == "sonic")
    assert sonic["allow_plaintext_credentials"] and "allow_plaintext_credentials" not in gnmi_tls[0]
    for data in (tls, plain):
        assert Config.model_validate(data).targets

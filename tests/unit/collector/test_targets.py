"""Target resolution: first match wins, templates, unmatched switches, deterministic shards."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collector.config import TargetConfig
from collector.targets import in_shard, parse_shard, resolve_targets, shard_of
from config.errors import ConfigError
from fabric.model import FabricParams
from fabric.topology import build_aipod

FABRIC = build_aipod(FabricParams(gpus=64, radix=16))


def entry(**kw: object) -> TargetConfig:
    return TargetConfig.model_validate(kw)


def test_first_match_wins_and_templates_fill() -> None:
    targets, unmatched = resolve_targets(
        [
            entry(switches=["lf-g1-r1"], protocol="snmp", address="10.0.0.1:161", community="special"),
            entry(switches=["lf-*"], protocol="gnmi", address="127.0.0.1:9339", target="{switch}"),
            entry(switches=["sp-*"], protocol="snmp", address="127.0.0.1:1161", community="{switch}-{rail}"),
        ],
        FABRIC,
    )
    by = {t.switch: t for t in targets}
    assert by["lf-g1-r1"].protocol == "snmp" and by["lf-g1-r1"].address == "10.0.0.1:161"
    assert by["lf-g1-r2"].protocol == "gnmi" and by["lf-g1-r2"].gnmi_target == "lf-g1-r2"
    community = by["sp-r3-1"].community
    assert community is not None and community.get_secret_value() == "sp-r3-1-3"
    assert unmatched == sorted(s for s in FABRIC.switches if s.startswith("ssp-"))


def test_missing_inventory_field_is_a_clear_error() -> None:
    with pytest.raises(
        ConfigError, match=r"targets\[0\]\.address: switch lf-g1-r1 has no inventory field 'mgmt_address'"
    ):
        resolve_targets([entry(switches=["*"], protocol="gnmi", address="{mgmt_address}:9339")], FABRIC)


def test_shard_parsing() -> None:
    assert parse_shard("1/4") == (1, 4)
    with pytest.raises(ConfigError):
        parse_shard("4/4")


@given(st.integers(1, 7))
def test_shards_partition_the_targets(count: int) -> None:
    targets, _ = resolve_targets([entry(switches=["*"], protocol="gnmi", address="127.0.0.1:1")], FABRIC)
    parts = [in_shard(targets, i, count) for i in range(count)]
    names = sorted(t.switch for part in parts for t in part)
    assert names == sorted(t.switch for t in targets)  # each switch in exactly one shard
    # Stable across processes: a fixed hash, not Python's salted hash().
    assert shard_of("lf-g1-r1", 7) == 2935357390 % 7

"""The simulated transceivers and FEC (simulator/optics.py) and the optics fault kinds of SPEC §10.5."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric.model import FabricParams
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState
from simulator.faults import FaultError
from simulator.optics import (
    BIAS_FAIL_MA,
    FAIL_BER,
    MODULE_THRESHOLDS,
    OpticReading,
    codeword_rates,
    loss_to_fail,
)

FABRIC = build_aipod(FabricParams(gpus=128, radix=16))
LEAF = "lf-g1-r1"
S = 1_000_000_000


class Clocked:
    def __init__(self) -> None:
        self.now = 1_700_000_000 * S
        self.state = FabricState(FABRIC, seed=1, clock=lambda: self.now)

    def at(self, seconds: float, port: str) -> OpticReading:
        self.now += round(seconds * S)
        return next(r for r in self.state.transceivers(LEAF, self.now) if r.port == port)

    def oper(self, port: str) -> bool:
        return next(p for p in self.state.ports(LEAF, self.now) if p.name == port).oper_up


def uplink(c: Clocked, kind: str, **fields: float | str) -> str:
    fault = c.state.apply({"kind": kind, "switch": LEAF, **fields})
    assert fault.port is not None
    return fault.port


def high_share(before: OpticReading, after: OpticReading) -> float:
    """Share of the codewords between two readings with 3+ symbol errors."""
    d = [b - a for a, b in zip(before.fec_bins, after.fec_bins, strict=True)]
    return sum(d[3:]) / max(1, sum(d))


def test_every_cabled_port_has_an_optic_with_the_modules_thresholds() -> None:
    c = Clocked()
    readings = c.state.transceivers(LEAF)
    cabled = [p.name for p in FABRIC.ports(LEAF) if p.peer is not None]
    assert [r.port for r in readings] == cabled
    r = readings[0]
    assert r.thresholds == MODULE_THRESHOLDS
    assert r.rx_power_dbm > MODULE_THRESHOLDS.rx_low_warning_dbm
    assert r.laser_bias_ma < MODULE_THRESHOLDS.bias_high_warning_ma
    assert r.component != r.port  # the collector must take the mapping from the device
    assert 1e-10 < r.pre_fec_ber < 1e-8 and r.fec_uncorrectable == 0
    assert r.fec_bins[0] > 1000 * r.fec_bins[1] > 0  # days of uptime, nearly every codeword clean
    assert c.state.transceivers("nope") == []


def test_optic_degrade_lowers_rx_shifts_the_bins_up_then_fails_the_link() -> None:
    c = Clocked()
    port = uplink(c, "optic_degrade", db_per_hour=3600.0)  # 1 dB per second
    r0 = c.at(0, port)
    r1 = c.at(1, port)
    r2 = c.at(1, port)
    assert r1.rx_power_dbm == pytest.approx(r0.rx_power_dbm - 1.0, abs=0.11)  # with the DOM's wobble
    assert r2.rx_power_dbm == pytest.approx(r0.rx_power_dbm - 2.0, abs=0.11)
    assert r2.pre_fec_ber > r1.pre_fec_ber > r0.pre_fec_ber
    r5 = c.at(3, port)
    r6 = c.at(1, port)
    assert high_share(r5, r6) > high_share(r1, r2)
    assert c.oper(port)
    optic = c.state.optics.of(LEAF, port)
    fail_s = loss_to_fail(optic.base_log_ber)  # seconds at 1 dB/s
    assert 6 < fail_s < 10
    before = c.at(fail_s - 6 + 0.5 - 1.0, port)  # just before the failure
    assert c.oper(port) and before.pre_fec_ber < FAIL_BER
    assert sum(before.fec_bins[8:]) > 0 == sum(r0.fec_bins[8:])  # codewords near the 15-symbol limit
    after = c.at(1.0, port)
    assert not c.oper(port)
    later = c.at(5.0, port)
    assert later.fec_bins == after.fec_bins  # a dead link carries no codewords
    c.state.clear(c.state.active()[0].id)
    assert c.oper(port)
    back = c.at(1.0, port)
    assert back.rx_power_dbm == pytest.approx(r0.rx_power_dbm, abs=0.11) and back.fec_bins[0] > after.fec_bins[0]


def test_laser_aging_raises_bias_at_constant_tx_until_the_laser_dies() -> None:
    c = Clocked()
    port = uplink(c, "laser_aging", ma_per_hour=3600.0)  # 1 mA per second
    r0 = c.at(0, port)
    r3 = c.at(3, port)
    assert r3.laser_bias_ma == pytest.approx(r0.laser_bias_ma + 3.0, abs=0.05)
    assert r3.tx_power_dbm == r0.tx_power_dbm and r3.rx_power_dbm == pytest.approx(r0.rx_power_dbm, abs=0.11)
    left = BIAS_FAIL_MA - c.state.optics.of(LEAF, port).bias_ma(c.now)
    c.at(left - 0.5, port)
    assert c.oper(port)
    c.at(1.0, port)
    assert not c.oper(port)


def test_dirty_connector_is_a_step_loss_then_stable_and_the_link_lives() -> None:
    c = Clocked()
    port = next(p.name for p in FABRIC.ports(LEAF) if p.peer is not None and p.direction == "up")
    r0 = c.at(0, port)
    uplink(c, "dirty_connector", port=port, loss_db=2.0)
    r1 = c.at(1, port)
    r2 = c.at(3600, port)
    assert r1.rx_power_dbm == pytest.approx(r0.rx_power_dbm - 2.0, abs=0.11)
    assert r2.rx_power_dbm == pytest.approx(r1.rx_power_dbm, abs=0.11) and r2.pre_fec_ber == r1.pre_fec_ber
    assert r2.rx_power_dbm > MODULE_THRESHOLDS.rx_low_warning_dbm and c.oper(port)


def test_a_dirty_connector_past_the_margin_fails_at_once() -> None:
    c = Clocked()
    port = uplink(c, "dirty_connector", loss_db=20.0)
    c.at(0.001, port)
    assert not c.oper(port)


def test_fec_burst_raises_the_high_bins_for_its_duration_then_recovers() -> None:
    c = Clocked()
    port = uplink(c, "fec_burst", duration_s=10.0)
    r0 = c.at(0, port)
    r5 = c.at(5, port)
    r10 = c.at(5, port)
    r20 = c.at(10, port)
    assert r5.pre_fec_ber > 1000 * r20.pre_fec_ber
    assert high_share(r0, r5) > 100 * max(high_share(r10, r20), 1e-12)
    assert r20.pre_fec_ber < 1e-8 and c.oper(port)
    assert len(c.state.active()) == 1  # listed until cleared, as a finite flap is


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ({"kind": "optic_degrade", "switch": LEAF, "db_per_hour": 0}, "db_per_hour"),
        ({"kind": "fec_burst", "switch": LEAF, "duration_s": -1}, "duration_s"),
        ({"kind": "laser_aging", "switch": LEAF, "loss_db": 1}, "does not apply"),
    ],
)
def test_bad_optics_faults_are_refused(fault: dict[str, object], message: str) -> None:
    with pytest.raises(FaultError, match=message):
        Clocked().state.apply(fault)


def test_the_defaults_are_filled_in() -> None:
    c = Clocked()
    f = c.state.apply({"kind": "optic_degrade", "switch": LEAF})
    assert f.to_dict()["db_per_hour"] == 1.0


@settings(max_examples=40, deadline=None)
@given(
    rate=st.sampled_from([0.5, 60.0, 3600.0]),
    steps=st.lists(st.floats(0.0, 4.0), min_size=2, max_size=12),
)
def test_fec_counters_never_go_back(rate: float, steps: list[float]) -> None:
    c = Clocked()
    port = uplink(c, "optic_degrade", db_per_hour=rate)
    last = c.at(0, port)
    for s in steps:
        r = c.at(s, port)
        assert all(b >= a for a, b in zip(last.fec_bins, r.fec_bins, strict=True))
        assert r.fec_uncorrectable >= last.fec_uncorrectable and r.symbol_errors >= last.symbol_errors
        last = r


def test_the_dom_wobble_is_small_deterministic_and_centred() -> None:
    c = Clocked()
    optic = c.state.optics.of(LEAF, next(p.name for p in FABRIC.ports(LEAF) if p.peer is not None))
    draws = [optic.noise(c.now + k * S) for k in range(2000)]
    assert all(-1.0 <= d < 1.0 for d in draws) and abs(sum(draws) / len(draws)) < 0.05
    assert optic.noise(c.now) == optic.noise(c.now + S // 2)  # one draw per second, whoever reads


def test_codeword_rates_are_a_poisson_split_of_the_codewords() -> None:
    bins, unc, sym = codeword_rates(1e-4, 1000.0)
    lam = 544 * (1 - (1 - 1e-4) ** 10)  # 0.5437...
    assert bins[0] == pytest.approx(1000 * math.exp(-lam))
    assert bins[2] == pytest.approx(1000 * math.exp(-lam) * lam**2 / 2)
    assert sum(bins) + unc == pytest.approx(1000.0)
    assert sym == pytest.approx(1000 * lam)

"""Link-health leaves → FEC and DOM samples (collector/optics_decode.py): OpenConfig and SONiC shapes,
the device's interface ↔ transceiver map, bounds and skipped-value counts."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collector.optics_decode import UNMAPPED, OpenConfigOptics, SonicOptics, bounded, sonic_sensor
from fabric.model import FabricParams
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState
from simulator.gnmi_optics import openconfig_leaves, sonic_tables

AT = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
STATE = FabricState(build_aipod(FabricParams(gpus=128, radix=16)), seed=2, clock=lambda: 1_700_000_000 * 10**9)
READINGS = STATE.transceivers("lf-g1-r1")


def e(elem: str, **keys: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return (elem, tuple(sorted(keys.items())))


def test_openconfig_shapes_of_the_simulator_decode_to_what_it_reports() -> None:
    bad: Counter[str] = Counter()
    dec = OpenConfigOptics("lf-g1-r1", lambda kind, n: bad.update({kind: n}))
    leaves = [leaf for r in READINGS for leaf in openconfig_leaves(r)]
    batch = dec.decode(AT, leaves)
    assert not bad
    r = READINGS[0]
    fec = next(s for s in batch.fec if s.port == r.port)
    assert (fec.corrected, fec.uncorrectable, fec.symbol_errors) == (
        r.fec_corrected,
        r.fec_uncorrectable,
        r.symbol_errors,
    )
    assert fec.pre_fec_ber == r.pre_fec_ber and fec.bins is None  # OpenConfig has no histogram
    dom = next(s for s in batch.dom if s.port == r.port)
    assert dom.component == r.component != r.port
    assert (dom.rx_power_dbm, dom.tx_power_dbm, dom.laser_bias_ma) == (r.rx_power_dbm, r.tx_power_dbm, r.laser_bias_ma)
    assert r.thresholds is not None
    assert dom.rx_low_warning_dbm == r.thresholds.rx_low_warning_dbm
    assert dom.bias_high_critical_ma == r.thresholds.bias_high_critical_ma
    assert len(batch.dom) == len(READINGS)


def test_a_transceiver_no_interface_names_is_skipped_and_counted_never_guessed() -> None:
    bad: Counter[str] = Counter()
    dec = OpenConfigOptics("sw", lambda kind, n: bad.update({kind: n}))
    comp = (e("components"), e("component", name="Ethernet1"))  # the same name as an interface
    chan = (*comp, e("transceiver"), e("physical-channels"), e("channel", index="1"), e("state"))
    batch = dec.decode(AT, [((*chan, e("input-power"), e("instant")), -3.0)])
    assert batch.dom == [] and bad == {UNMAPPED: 1}
    # once the device maps it, the same leaf lands on the interface it names
    iface = (e("interfaces"), e("interface", name="Ethernet9"), e("state"), e("transceiver"))
    batch = dec.decode(AT, [(iface, "Ethernet1"), ((*chan, e("input-power"), e("instant")), -3.0)])
    assert [(d.port, d.component, d.rx_power_dbm) for d in batch.dom] == [("Ethernet9", "Ethernet1", -3.0)]


def test_the_worst_lane_sums_up_a_module() -> None:
    dec = OpenConfigOptics("sw", lambda kind, n: None)
    comp = (e("components"), e("component", name="xcvr-1"))
    leaves: list[tuple[Any, Any]] = [
        ((e("interfaces"), e("interface", name="et1"), e("state"), e("transceiver")), "xcvr-1")
    ]
    for lane, rx, bias in (("1", -2.0, 7.0), ("2", -5.5, 9.0), ("3", -1.0, 6.0)):
        chan = (*comp, e("transceiver"), e("physical-channels"), e("channel", index=lane), e("state"))
        leaves += [
            ((*chan, e("input-power"), e("instant")), rx),
            ((*chan, e("laser-bias-current"), e("instant")), bias),
        ]
    (dom,) = dec.decode(AT, leaves).dom
    assert (dom.rx_power_dbm, dom.laser_bias_ma) == (-5.5, 9.0)
    assert dom.rx_low_warning_dbm is None  # a module without thresholds: the analyzer's configured ones apply


@pytest.mark.parametrize(
    ("value", "kind"),
    [(float("nan"), "not_a_number"), (-99.0, "out_of_range"), (True, "wrong_type"), ("x" * 5000, "too_long"),
     ("abc", "not_a_number"), (b"-3", "wrong_type"), (1e308, "out_of_range")],
)  # fmt: skip
def test_out_of_bounds_dom_values_are_skipped_and_counted(value: Any, kind: str) -> None:
    bad: Counter[str] = Counter()
    dec = OpenConfigOptics("sw", lambda k, n: bad.update({k: n}))
    comp = (e("components"), e("component", name="x"))
    chan = (*comp, e("transceiver"), e("physical-channels"), e("channel", index="1"), e("state"))
    leaves = [
        ((e("interfaces"), e("interface", name="et1"), e("state"), e("transceiver")), "x"),
        ((*chan, e("input-power"), e("instant")), value),
        ((*chan, e("output-power"), e("instant")), 1.0),
    ]
    (dom,) = dec.decode(AT, leaves).dom
    assert dom.rx_power_dbm is None and dom.tx_power_dbm == 1.0
    assert bad == {kind: 1}


def test_sonic_tables_of_the_simulator_decode_with_their_bins() -> None:
    bad: Counter[str] = Counter()
    counters, dom, limits = sonic_tables(READINGS)
    counters[READINGS[0].port]["SAI_PORT_STAT_IF_IN_OCTETS"] = "12"  # other fields are not ours
    batch = SonicOptics("lf-g1-r1", lambda k, n: bad.update({k: n})).decode(AT, counters, dom, limits)
    assert not bad
    r = READINGS[0]
    fec = next(s for s in batch.fec if s.port == r.port)
    assert fec.bins == r.fec_bins and fec.corrected == r.fec_corrected
    d = next(s for s in batch.dom if s.port == r.port)
    assert d.rx_power_dbm == pytest.approx(r.rx_power_dbm, abs=1e-4) and d.component == r.port
    assert r.thresholds is not None and d.rx_low_critical_dbm == pytest.approx(r.thresholds.rx_low_critical_dbm)


def test_sonic_na_is_not_reported_and_garbage_is_counted() -> None:
    bad: Counter[str] = Counter()
    batch = SonicOptics("sw", lambda k, n: bad.update({k: n})).decode(
        AT,
        counters={"Ethernet0": {"SAI_PORT_STAT_IF_IN_FEC_CORRECTABLE_FRAMES": "-5",
                                "SAI_PORT_STAT_IF_IN_FEC_CODEWORD_ERRORS_S3": "7"}},
        dom={"Ethernet0": {"rx1power": "N/A", "rx2power": "-inf", "tx1bias": "6.5", "rx999power": "-1"}},
    )  # fmt: skip
    assert bad == {"negative": 1, "not_a_number": 1}
    assert batch.fec == []  # the counter was invalid, and one bin is not a histogram
    (d,) = batch.dom
    assert d.rx_power_dbm is None and d.laser_bias_ma == 6.5


@given(st.lists(st.one_of(st.floats(-80, 40).map(str), st.text(max_size=12), st.floats().map(repr)), max_size=4))
def test_thresholds_read_again_every_sample_decode_and_count_as_they_did_the_first_time(texts: list[str]) -> None:
    """A module's thresholds come with every DOM sample; their texts' answers are remembered, so
    the second and third decodes must give what the first gave, invalid texts counted each time."""
    names = ["rxpowerlowwarning", "rxpowerlowalarm", "txbiashighwarning", "txbiashighalarm"]
    limits = {"Ethernet0": dict(zip(names, texts, strict=False))}

    def once() -> tuple[Any, dict[str, int]]:
        bad: Counter[str] = Counter()
        batch = SonicOptics("sw", lambda k, n: bad.update({k: n})).decode(
            AT, dom={"Ethernet0": {"rx1power": "-2.5"}}, thresholds=limits
        )
        return batch.dom, dict(bad)

    runs = [once() for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]
    (d,) = runs[0][0]
    for name, field in zip(names, ("rx_low_warning_dbm", "rx_low_critical_dbm", "bias_high_warning_ma",
                                   "bias_high_critical_ma"), strict=True):  # fmt: skip
        text = limits["Ethernet0"].get(name)
        try:
            expected = (
                None if text is None or text in ("N/A", "n/a", "", "None") else bounded(text, field[-3:].strip("_"))
            )
        except Exception:
            expected = None
        assert getattr(d, field) == expected


@given(st.one_of(st.floats(allow_nan=True), st.integers(), st.text(max_size=40), st.booleans(), st.none()))
def test_bounded_either_returns_a_value_in_bounds_or_says_why(value: Any) -> None:
    from collector.gnmi_values import Bad

    try:
        v = bounded(value, "dbm")
    except Bad as exc:
        assert exc.args[0] in {"not_a_number", "out_of_range", "wrong_type", "too_long"}
    else:
        assert -60.0 <= v <= 20.0


_FEC_NAMES = [f"SAI_PORT_STAT_IF_IN_FEC_CODEWORD_ERRORS_S{i}" for i in range(16)] + [
    "SAI_PORT_STAT_IF_IN_FEC_CORRECTABLE_FRAMES",
    "SAI_PORT_STAT_IF_IN_FEC_NOT_CORRECTABLE_FRAMES",
    "SAI_PORT_STAT_IF_IN_FEC_SYMBOL_ERRORS",
]
_PLAIN = st.integers(0, 10**19 + 5).map(str)  # the usual form, up to past 64 bits
_ODD = st.one_of(
    st.sampled_from(["", "-1", " 12", "+3", "1e3", "\uff10", "99999999999999999999", "N/A"]),
    st.integers(-5, 2**64 + 5),
    st.none(),
)


@given(st.fixed_dictionaries({name: _PLAIN for name in _FEC_NAMES}), st.sets(st.sampled_from(_FEC_NAMES)), st.data())
def test_a_whole_fec_hash_decodes_as_the_careful_path_does(
    fields: dict[str, Any], odd: set[str], data: st.DataObject
) -> None:
    """sonic-gnmi's 19 FEC fields take a fast path; a hash with one more field (not FEC) takes
    the careful one, field by field. Both give the same sample and count the same invalid values,
    whichever fields hold something other than a plain decimal."""
    fields.update({name: data.draw(_ODD) for name in odd})

    def decode(hashes: dict[str, Any]) -> tuple[Any, Counter[str]]:
        bad: Counter[str] = Counter()
        batch = SonicOptics("sw", lambda k, n: bad.update({k: n})).decode(AT, counters={"Ethernet0": hashes})
        return batch.fec, bad

    assert decode(fields) == decode({**fields, "SAI_PORT_STAT_IF_IN_OCTETS": "1"})


_LANES = [
    f"{kind}{lane}{unit}"
    for kind, unit in (("rx", "power"), ("tx", "power"), ("tx", "bias"))
    for lane in (1, 2, 8, "01")
]


@given(
    st.dictionaries(
        st.sampled_from([*_LANES, "temperature", "voltage"]),
        st.one_of(st.floats(-70, 1100).map(lambda x: f"{x:.3f}"), st.sampled_from(["N/A", "junk", "nan"])),
        max_size=14,
    )
)
def test_a_sensor_hash_read_by_its_plan_reads_as_the_careful_way_does(sensor: dict[str, str]) -> None:
    """Any lanes in any order: the worst (lowest rx and tx power, highest bias), the temperature,
    and the same invalid values counted, by the field names' plan or field by field."""
    careful: Counter[str] = Counter()
    (d,) = SonicOptics("sw", lambda k, n: careful.update({k: n})).decode(AT, dom={"Ethernet0": sensor}).dom or (None,)
    got = sonic_sensor(sensor)
    assert got is not None
    read, bad = got
    assert bad == careful
    assert read == ((d.rx_power_dbm, d.tx_power_dbm, d.laser_bias_ma, d.temperature_c) if d else (None,) * 4)

"""Transceiver DOM over SNMP: sensor scale and precision, direction, and ENTITY-MIB containment.

Worked examples are the real figures of a recorded Arista DCS-7150S (snmpsim-data) and of
sonic-snmpagent's sensor classes; the property tests run the simulator's encoding
(simulator/snmp_entity.py) against the collector's decoding (collector/snmp_dom.py).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collector.gnmi_values import Bad
from collector.snmp_dom import (
    MAX_DEPTH,
    NO_DIRECTION,
    EntityTree,
    decode,
    direction,
    if_index_of,
    quantity,
    scaled,
)
from simulator.snmp_entity import SCALE_MILLI, SCALE_UNITS, sensor_value

AT = datetime(2026, 1, 1, tzinfo=UTC)
IFX = "1.3.6.1.2.1.2.2.1.1"


@pytest.mark.parametrize(
    ("kind", "scale", "precision", "value", "units", "expected"),
    [
        (6, 8, 4, 4025, "mW", ("dbm", 10 * math.log10(0.4025))),  # Arista: DOM RX Power, 0.4025 mW
        (6, 8, 4, 10000, "mW", ("dbm", 0.0)),  # 1 mW is 0 dBm
        (6, 7, 1, 6310, "uW", ("dbm", 10 * math.log10(0.631))),  # micro(7): 631.0 µW
        (5, 8, 2, 509, "mA", ("ma", 5.09)),  # Arista: DOM TX Bias, 5.09 mA
        (5, 8, 3, 7250, "mA", ("ma", 7.25)),  # SONiC: amperes, milli, precision 3
        (8, 9, 1, 229, "Celsius", ("celsius", 22.9)),  # Arista: DOM Temperature
        (8, 9, 6, 41_500_000, "C", ("celsius", 41.5)),  # SONiC: precision 6
        (8, 8, 0, 53222, "C", ("celsius", 53.222)),  # milli-degrees (NX-OS's entSensor shape)
        (1, 9, 2, -215, "dBm", ("dbm", -2.15)),  # other(1) + "dBm" units: dBm as is
        (1, 9, 2, -215, " DBM ", ("dbm", -2.15)),
        (8, 9, -1, 4, "C", ("celsius", 40.0)),  # negative precision: tens
    ],
)
def test_sensor_scale_and_precision(
    kind: int, scale: int, precision: int, value: int, units: str, expected: tuple[str, float]
) -> None:
    got = quantity(kind, scale, precision, value, units)
    assert got is not None
    assert got[0] == expected[0]
    assert got[1] == pytest.approx(expected[1], abs=1e-9)


@pytest.mark.parametrize(
    ("kind", "units"),
    [(4, "Volts"), (10, "RPM"), (1, "mW"), (1, ""), (2, "dBm"), (3, "V")],
)
def test_other_types_are_not_dom(kind: int, units: str) -> None:
    assert quantity(kind, 9, 0, 1, units) is None


@pytest.mark.parametrize(
    ("kind", "scale", "precision", "value", "reason"),
    [
        (6, 8, 4, 0, "out_of_range"),  # no light: no dBm
        (6, 8, 4, -5, "out_of_range"),
        (6, 8, 4, 2_000_000_000, "out_of_range"),  # beyond SensorValue
        (6, 18, 4, 100, "out_of_range"),  # no such scale
        (6, 0, 4, 100, "out_of_range"),
        (6, 2**63, 4, 100, "out_of_range"),  # a scale whose power of ten would overflow a float
        (6, 8, -(2**63), 100, "out_of_range"),
        (6, 8, 10, 100, "out_of_range"),  # precision is -8..9
        (8, 9, 0, 500, "out_of_range"),  # 500 °C
        (5, 9, 0, 2, "out_of_range"),  # 2 A of laser bias
        (6, 8, "4", 100, "wrong_type"),
        (6, 8, 4, b"\x01", "wrong_type"),
        (6, 8, 4, True, "wrong_type"),
        ("6", 8, 4, 100, "wrong_type"),
        (6, None, 4, 100, "wrong_type"),
    ],
)
def test_unreadable_values_raise_their_kind(kind: object, scale: object, precision: object, value: object,
                                             reason: str) -> None:  # fmt: skip
    with pytest.raises(Bad) as exc:
        quantity(kind, scale, precision, value, "")  # type: ignore[arg-type]
    assert exc.value.args[0] == reason


@given(
    dbm=st.floats(min_value=-40.0, max_value=8.0),
    scale=st.sampled_from([7, 8]),
    precision=st.integers(min_value=0, max_value=6),
)
def test_power_roundtrips_through_the_simulators_encoding(dbm: float, scale: int, precision: int) -> None:
    """A power the simulator encodes in watts at any scale and precision decodes to its dBm within
    the encoding's own step (half a unit of the last digit, seen in dB)."""
    watts = 10 ** (dbm / 10) / 1000
    value = sensor_value(watts, scale, precision)
    step = 10.0 ** (3 * (scale - 9) - precision)  # watts per unit of the value
    if value < 2 or abs(value) >= 1_000_000_000:
        return  # below two steps the dB error is unbounded; clamped values are another test
    got = quantity(6, scale, precision, value, "")
    assert got is not None and got[0] == "dbm"
    tolerance = 10 * math.log10(watts / (watts - step / 2))  # rounding down costs the most dB
    assert abs(got[1] - dbm) <= tolerance + 1e-9


@given(
    quantity_=st.floats(min_value=-50.0, max_value=150.0),
    scale=st.integers(min_value=6, max_value=10),
    precision=st.integers(min_value=-2, max_value=9),
)
def test_scaled_inverts_sensor_value(quantity_: float, scale: int, precision: int) -> None:
    value = sensor_value(quantity_, scale, precision)
    if abs(value) >= 1_000_000_000:
        return
    step = 10.0 ** (3 * (scale - 9) - precision)
    assert abs(scaled(value, scale, precision) - quantity_) <= step / 2 * (1 + 1e-9) + 1e-12


_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**63), max_value=2**64), st.binary(max_size=40),
    st.text(max_size=40), st.floats(allow_nan=True, allow_infinity=True),
)  # fmt: skip


@given(
    rows=st.dictionaries(
        st.text(alphabet="0123456789.", min_size=1, max_size=8),
        st.tuples(_VALUES, _VALUES, _VALUES, _VALUES, _VALUES, _VALUES, _VALUES, _VALUES),
        max_size=30,
    )
)
def test_hostile_tables_never_raise(rows: dict[str, tuple[object, ...]]) -> None:
    """Whatever an agent answers in any column, decoding skips and counts, never raises."""
    physical = {"contained_in": {i: r[0] for i, r in rows.items()}, "descr": {i: r[1] for i, r in rows.items()},
                "name": {i: r[1] for i, r in rows.items()}}  # fmt: skip
    alias = {"identifier": {i: r[2] for i, r in rows.items()}}
    static = {"type": {i: r[3] for i, r in rows.items()}, "scale": {i: r[4] for i, r in rows.items()},
              "precision": {i: r[5] for i, r in rows.items()}, "units": {i: r[1] for i, r in rows.items()}}  # fmt: skip
    live = {"value": {i: r[6] for i, r in rows.items()}, "status": {i: r[7] for i, r in rows.items()}}
    tree = EntityTree.from_walk(physical, alias)  # type: ignore[arg-type]
    samples, counts = decode(AT, "sw", tree, static, live, {str(n): f"p{n}" for n in range(100)})  # type: ignore[arg-type]
    assert counts.sensors >= len(samples)
    for s in samples:
        assert s.port.startswith("p")
        for v in (s.rx_power_dbm, s.tx_power_dbm, s.laser_bias_ma, s.temperature_c):
            assert v is None or math.isfinite(v)


@pytest.mark.parametrize(
    ("texts", "expected"),
    [
        (("DOM RX Power Sensor for Ethernet5",), "rx"),
        (("DOM TX Power Sensor for Ethernet5",), "tx"),
        (("Ethernet1/1 Lane 1 Transceiver Receive Power Sensor",), "rx"),
        (("Ethernet1/1 Lane 1 Transceiver Transmit Power Sensor",), "tx"),
        (("xe-0/0/1 input power", ""), "rx"),
        (("xe-0/0/1 output power", ""), "tx"),
        (("Power Sensor for Ethernet5",), None),  # says neither
        (("RX/TX Power",), None),  # says both
        (("Xcvr Sensor", "Rxpower"), None),  # a word, not a substring
    ],
)
def test_power_direction_from_the_sensors_own_words(texts: tuple[str, ...], expected: str | None) -> None:
    assert direction(*texts) == expected


@pytest.mark.parametrize(
    ("identifier", "expected"),
    [(f"{IFX}.17", 17), (f".{IFX}.17", 17), (f"{IFX}.0", None), ("1.3.6.1.2.1.2.2.1.2.17", None),
     (f"{IFX}.17.1", None), (17, None), (b"1.3", None), (f"{IFX}.99999999999", None)],
)  # fmt: skip
def test_alias_identifier_must_point_at_an_ifindex(identifier: object, expected: int | None) -> None:
    assert if_index_of(identifier) == expected  # type: ignore[arg-type]


def _tree(
    parents: dict[str, str], aliases: dict[str, int], names: dict[str, str], port_class: bool = True
) -> EntityTree:
    """Entities; the aliased ones are port(10) unless ``port_class`` is False (container(5))."""
    return EntityTree.from_walk(
        {"contained_in": {i: int(p) for i, p in parents.items()}, "name": {i: n.encode() for i, n in names.items()},
         "cls": {e: 10 if port_class else 5 for e in aliases}},
        {"identifier": {f"{e}.0": f"{IFX}.{n}" for e, n in aliases.items()}},
    )  # fmt: skip


Columns = dict[str, dict[str, object]]


def _sensors(rows: dict[str, tuple[int, int, int, int]]) -> tuple[Columns, Columns]:
    static: Columns = {"type": {}, "scale": {}, "precision": {}, "units": {}}
    live: Columns = {"value": {}, "status": {}}
    for i, (kind, scale, precision, value) in rows.items():
        static["type"][i], static["scale"][i], static["precision"][i] = kind, scale, precision
        live["value"][i], live["status"][i] = value, 1
    return static, live


def test_sensors_map_to_ports_by_containment_and_alias_only() -> None:
    """Indexes in no order, names that point elsewhere: only containment and the alias decide."""
    tree = _tree(
        parents={"77": "5", "31": "77", "32": "77", "33": "77", "34": "77", "90": "6", "91": "90", "5": "1", "6": "1"},
        aliases={"5": 12, "6": 3},
        names={"77": "xcvr-a", "31": "DOM RX Power Sensor for Ethernet3", "32": "DOM TX Power Sensor",
               "33": "bias", "34": "temp", "90": "xcvr-b", "91": "DOM RX Power Sensor for Ethernet12"},
    )  # fmt: skip
    static, live = _sensors({"31": (6, 8, 4, 5000), "32": (6, 8, 4, 12589), "33": (5, 8, 2, 700),
                             "34": (8, 9, 1, 415), "91": (6, 8, 4, 1000)})  # fmt: skip
    samples, counts = decode(AT, "sw", tree, static, live, {"12": "Ethernet12", "3": "Ethernet3"})  # type: ignore[arg-type]
    by_port = {s.port: s for s in samples}
    assert set(by_port) == {"Ethernet12", "Ethernet3"}
    a = by_port["Ethernet12"]  # sensors under entity 5, whose alias is ifIndex 12, whatever they say
    assert a.component == "xcvr-a"
    assert a.rx_power_dbm == pytest.approx(10 * math.log10(0.5))
    assert a.tx_power_dbm == pytest.approx(10 * math.log10(1.2589))
    assert a.laser_bias_ma == pytest.approx(7.0) and a.temperature_c == pytest.approx(41.5)
    b = by_port["Ethernet3"]
    assert b.component == "xcvr-b" and b.rx_power_dbm == pytest.approx(-10.0) and b.tx_power_dbm is None
    assert counts.unmapped == 0 and counts.sensors == 5


def test_an_aliased_transceiver_is_its_own_component() -> None:
    """Arista's shape: sensors in a lane module in the transceiver container; an agent that maps
    the container itself to its interface makes it the component, not the lane."""
    tree = _tree(
        parents={"100305100": "100305000", "100305210": "100305100", "100305213": "100305210",
                 "100305201": "100305100"},
        aliases={"100305100": 5},
        names={"100305100": "Xcvr for Ethernet5", "100305210": "Lane 0 for Xcvr for Ethernet5",
               "100305213": "DOM RX Power Sensor for Ethernet5", "100305201": "DOM Temperature Sensor"},
        port_class=False,
    )  # fmt: skip
    static, live = _sensors({"100305213": (6, 8, 4, 4025), "100305201": (8, 9, 1, 229)})
    samples, _ = decode(AT, "sw", tree, static, live, {"5": "Ethernet5"})  # type: ignore[arg-type]
    assert [(s.port, s.component, s.temperature_c) for s in samples] == [("Ethernet5", "Xcvr for Ethernet5", 22.9)]


def test_unmapped_loops_and_deep_chains_are_skipped_and_counted() -> None:
    chain = {str(i): str(i + 1) for i in range(100, 100 + MAX_DEPTH + 2)}
    tree = _tree(
        parents={"10": "11", "11": "10", "20": "21", "30": "1", **chain},
        aliases={"21": 4, str(100 + MAX_DEPTH + 2): 5},
        names={"10": "DOM RX Power Sensor for Ethernet4"},
    )
    static, live = _sensors({"10": (6, 8, 4, 100), "20": (8, 9, 0, 40), "30": (8, 9, 0, 40), "100": (8, 9, 0, 40)})
    samples, counts = decode(AT, "sw", tree, static, live, {"4": "Ethernet4", "5": "Ethernet5"})  # type: ignore[arg-type]
    assert [(s.port, s.component, s.temperature_c) for s in samples] == [("Ethernet4", "entity 20", 40.0)]
    assert counts.unmapped == 3  # the loop, the chassis sensor, the chain longer than MAX_DEPTH


def test_worst_lane_wins_and_bad_sensors_are_counted() -> None:
    tree = _tree(
        parents={"2": "1", "3": "2", "4": "2", "5": "2", "6": "2", "7": "2", "8": "2", "9": "2"},
        aliases={"1": 9},
        names={"2": "qsfp", "3": "Lane 1 RX power", "4": "Lane 2 RX power", "5": "Lane 1 bias", "6": "Lane 2 bias",
               "7": "power", "8": "Lane 3 RX power", "9": "Lane 4 RX power"},
    )  # fmt: skip
    static, live = _sensors({"3": (6, 8, 4, 5000), "4": (6, 8, 4, 2000), "5": (5, 8, 2, 700), "6": (5, 8, 2, 900),
                             "7": (6, 8, 4, 3000), "8": (6, 8, 4, 0), "9": (6, 8, 4, 100)})  # fmt: skip
    live["status"]["9"] = 2  # unavailable: not reported, not invalid
    samples, counts = decode(AT, "sw", tree, static, live, {"9": "swp9"})  # type: ignore[arg-type]
    assert len(samples) == 1
    assert samples[0].rx_power_dbm == pytest.approx(10 * math.log10(0.2))
    assert samples[0].laser_bias_ma == pytest.approx(9.0)
    assert counts.invalid == {NO_DIRECTION: 1, "out_of_range": 1}


def test_a_port_with_no_transceiver_gives_no_sample() -> None:
    tree = _tree(parents={"1000": "1", "2000": "1"}, aliases={"1000": 1, "2000": 2}, names={})
    samples, counts = decode(AT, "sw", tree, {}, {}, {"1": "swp1", "2": "swp2"})
    assert samples == [] and counts.sensors == 0


def test_simulator_presentations_are_the_reference_agents() -> None:
    from simulator.snmp_entity import EOS, SONIC

    assert (EOS.power, EOS.bias, EOS.temperature) == ((SCALE_MILLI, 4), (SCALE_MILLI, 2), (SCALE_UNITS, 1))
    assert (SONIC.power, SONIC.bias, SONIC.temperature) == ((SCALE_MILLI, 4), (SCALE_MILLI, 3), (SCALE_UNITS, 6))

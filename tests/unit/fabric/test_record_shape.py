"""One record shape: the 16 counters of fabric/record.py, and everything that names them or builds
their records by position (issue 27 item 5).

What agrees with :data:`fabric.record.COUNTER_FIELDS`:

- the protocol collectors' reading (PortReading), in the order the gNMI decoder passes it by position;
- the decoder's row (collector.profiles' columns);
- the ``port_counters`` row (PortSample), in the order the Python and the C ``port_row`` build it;
- the C ``port_row`` itself: each value lands in the column of its name (run, not read);
- the ``port_counters`` columns of the migrations (parsed, so this stays a fast unit test;
  tests/integration/test_migrate.py checks the same against a live database);
- the simulated switch's counters (PortCounters and the leaves the simulator serves).
"""

from __future__ import annotations

import re
from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path

from collector import counters, gnmi_group, profiles, speedups
from collector.records import COUNTER_FIELDS as COLLECTOR_COUNTERS
from collector.records import PortReading
from fabric.record import COUNTER_FIELDS, PER_SECOND
from simulator import ledger
from simulator.view import PortCounters
from store.records import PortSample

ROOT = Path(__file__).resolve().parents[3]
HEAD = ("time", "switch", "port", "oper_status", "speed_bps")


def port_counters_columns(migrations: Path) -> list[str]:
    """The ``port_counters`` columns, in order, after every migration in ``migrations``.

    Understands ``CREATE TABLE port_counters (...)`` and ``ALTER TABLE port_counters ADD COLUMN``;
    any other change to the table fails here, to be taught to this parser first.
    """
    columns: list[str] = []
    for sql in sorted(migrations.glob("*.sql")):
        text = re.sub(r"--[^\n]*", "", sql.read_text())
        create = re.search(r"CREATE TABLE port_counters \((.*?)\n\);", text, re.S)
        if create:
            for line in create.group(1).splitlines():
                word = line.strip().split(" ", 1)[0]
                if word and word.upper() not in {"PRIMARY", "UNIQUE", "CONSTRAINT", "CHECK", "FOREIGN"}:
                    columns.append(word)
        for alter in re.findall(r"ALTER TABLE (?:ONLY )?port_counters\b(.*?);", text, re.S):
            added = re.findall(r"ADD COLUMN (?:IF NOT EXISTS )?(\w+)", alter)
            assert added, f"{sql.name}: teach port_counters_columns this change: {alter.strip()}"
            columns += added
    return columns


def test_the_collector_names_the_counters_of_fabric_record() -> None:
    assert COLLECTOR_COUNTERS is COUNTER_FIELDS
    assert len(COUNTER_FIELDS) == len(set(COUNTER_FIELDS)) == 16
    assert set(PER_SECOND) <= set(COUNTER_FIELDS)


def test_port_reading_opens_with_the_order_the_decoder_builds_it_in() -> None:
    names = tuple(f.name for f in fields(PortReading))
    assert gnmi_group.READING_ORDER[5:21] == COUNTER_FIELDS
    assert names[: len(gnmi_group.READING_ORDER)] == gnmi_group.READING_ORDER


def test_the_decoders_row_holds_the_counters_in_their_order() -> None:
    assert [profiles.ROW_INDEX[name] for name in COUNTER_FIELDS] == list(range(len(COUNTER_FIELDS)))
    assert len(COUNTER_FIELDS) == gnmi_group._N


def test_port_sample_is_the_row_the_tracker_builds() -> None:
    assert counters.PORT_ROW[:5] == HEAD
    assert counters.PORT_ROW[5:21] == COUNTER_FIELDS
    assert PortSample._fields == counters.PORT_ROW


def test_the_c_port_row_puts_each_value_in_the_column_of_its_name() -> None:
    assert speedups.port_row is not None, speedups.unavailable
    # Counter i has the value 1000 + i and moved by 2**i in 2 s: every rate differs from the others.
    values = tuple(1000 + i for i in range(len(COUNTER_FIELDS)))
    delta = {name: 2**i for i, name in enumerate(COUNTER_FIELDS)}
    deltas = {name: (d, 2.0) for name, d in delta.items()}
    at = datetime(2026, 1, 1, tzinfo=UTC)
    done = speedups.port_row(
        PortSample, at, "sw", "p1", 1, 10**12, values, deltas, 1e15, 1e15, True, COUNTER_FIELDS, counters._RATE_NAMES
    )
    assert done is not None
    row, absurd = done
    assert absurd == 0
    expected: dict[str, object] = {"time": at, "switch": "sw", "port": "p1", "oper_status": 1, "speed_bps": 10**12}
    expected |= dict(zip(COUNTER_FIELDS, values, strict=True))
    expected |= {"interval_s": 2.0, "counter_reset": True}
    for d in ("in", "out"):
        expected[f"{d}_bps"] = delta[f"{d}_octets"] * 8 / 2.0
        expected[f"{d}_pps"] = sum(delta[f"{d}_{kind}_pkts"] for kind in ("unicast", "multicast", "broadcast")) / 2.0
    expected |= {f"{name}_ps": delta[name] / 2.0 for name in PER_SECOND}
    assert set(expected) == set(PortSample._fields)
    assert type(row) is PortSample
    assert row._asdict() == expected


def test_the_c_port_row_sizes_the_row_as_port_sample() -> None:
    source = (ROOT / "collector" / "_speedups.c").read_text()
    defined = {m[0]: int(m[1]) for m in re.findall(r"#define (ROW_HEAD|ROW_RATES|RATE_NAMES) (\d+)", source)}
    assert defined["ROW_HEAD"] == len(HEAD)
    assert defined["ROW_HEAD"] + len(COUNTER_FIELDS) + defined["ROW_RATES"] + 1 == len(PortSample._fields)
    assert defined["RATE_NAMES"] == len(counters._RATE_NAMES)


def test_the_migrations_create_the_columns_of_port_sample() -> None:
    assert port_counters_columns(ROOT / "migrations") == list(PortSample._fields)


def test_the_simulated_switch_serves_the_same_counters() -> None:
    assert set(COUNTER_FIELDS) == ledger.COUNTER_FIELDS
    kinds = {f.name: f.type for f in fields(PortCounters)}
    assert {name: kinds.get(name) for name in COUNTER_FIELDS} == dict.fromkeys(COUNTER_FIELDS, "int")

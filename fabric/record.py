"""The record shape: the 16 port counters, named once, that every layer carries alike.

A port's counters travel as one record per (switch, port, time): the protocol collectors'
reading (``collector.records.PortReading``), the ``port_counters`` row
(``store.records.PortSample``, the table's columns in ``migrations/002_timeseries.sql``), the
row the C builds (``collector/_speedups.c`` ``port_row``) and the simulated switch's state
(``simulator.view.PortCounters``). Each class spells its fields out, so the type checker knows
them; ``tests/unit/fabric/test_record_shape.py`` checks that all of them agree with this module.
"""

from __future__ import annotations

#: The counters, in ``port_counters`` column order (and PortReading's, where the decoders build
#: it by position). Unsigned 64-bit at the source (32-bit where a reading's ``wrap32`` says so).
COUNTER_FIELDS: tuple[str, ...] = (
    "in_octets",
    "out_octets",
    "in_unicast_pkts",
    "out_unicast_pkts",
    "in_multicast_pkts",
    "out_multicast_pkts",
    "in_broadcast_pkts",
    "out_broadcast_pkts",
    "in_errors",
    "out_errors",
    "in_discards",
    "out_discards",
    "in_fcs_errors",
    "carrier_transitions",
    "in_pause_frames",
    "out_pause_frames",
)

#: The counters whose per-second rate is a ``port_counters`` column (``<name>_ps``), in column order.
PER_SECOND: tuple[str, ...] = ("in_errors", "out_errors", "in_discards", "out_discards", "in_fcs_errors")

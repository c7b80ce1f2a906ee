"""The C twins of the collector's per-value path, when they were built (collector/_speedups.c).

``hatch_build.py`` compiles them at install; without a compiler, or with
``FABRICMON_PURE_PYTHON=1`` in the environment (benchmarks compare the two), :data:`fast_values`,
:data:`optics_pairs`, :data:`optics_slots`, :data:`optics_note`, :data:`deltas` and :data:`port_row` are None and the
callers run their Python (fabric/native.py).
The Python is the reference: the C does what it does or hands the input back
(tests/unit/collector/test_speedups.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fabric.native import load

FastValues = Callable[[Sequence[bytes], dict[bytes, Any], list[Any]], int]
OpticsPairs = Callable[[Sequence[bytes], dict[bytes, Any]], list[tuple[Any, int | float]] | None]
OpticsSlots = Callable[
    [Sequence[bytes], dict[bytes, int], tuple[tuple[float, float], ...]], list[int | float | None] | None
]
#: (raw SubscribeResponse, prefix bytes -> plan) -> (timestamp, plan, slot values, updates)
OpticsNote = Callable[[bytes, dict[bytes, Any]], tuple[int, Any, list[int | float | None], int] | None]
Deltas = Callable[
    [list[Any], list[int], tuple[int | None, ...], int, frozenset[str], bool, tuple[str, ...], int],
    tuple[dict[str, tuple[int, float]], int | None, bool, int, int, int] | None,
]

#: (cls, time, switch, port, oper, speed, values, deltas, max_bps, max_pps, reset, names, rate_names)
#: -> (row, absurd)
PortRow = Callable[..., tuple[Any, int] | None]

#: The extension, and why it is not in use ("" when it is).
#: collector/_speedups.c's ABI constant: raised with any change of a function's arguments or results.
ABI = 5
_module, unavailable = load("collector._speedups", ABI)
fast_values: FastValues | None = None if _module is None else _module.fast_values
optics_pairs: OpticsPairs | None = None if _module is None else _module.optics_pairs
optics_slots: OpticsSlots | None = None if _module is None else _module.optics_slots
optics_note: OpticsNote | None = None if _module is None else _module.optics_note
deltas: Deltas | None = None if _module is None else _module.deltas
port_row: PortRow | None = None if _module is None else _module.port_row

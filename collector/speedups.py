"""The C twins of the collector's per-value path, when they were built (collector/_speedups.c).

``hatch_build.py`` compiles them at install; without a compiler, or with
``FABRICMON_PURE_PYTHON=1`` in the environment (benchmarks compare the two), :data:`fast_values`,
:data:`deltas` and :data:`port_row` are None and the callers run their Python. The Python is the reference: the C
does what it does or hands the input back (tests/unit/test_speedups.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

FastValues = Callable[[Sequence[bytes], dict[bytes, Any], list[Any]], int]
Deltas = Callable[
    [list[Any], list[int], tuple[int | None, ...], int, frozenset[str], bool, tuple[str, ...], int],
    tuple[dict[str, tuple[int, float]], int | None, bool, int, int, int] | None,
]

#: (cls, time, switch, port, oper, speed, values, deltas, max_bps, max_pps, reset, names, rate_names)
#: -> (row, absurd)
PortRow = Callable[..., tuple[Any, int] | None]

fast_values: FastValues | None = None
deltas: Deltas | None = None
port_row: PortRow | None = None
#: Why the C is not in use ("" when it is).
unavailable = ""

if os.environ.get("FABRICMON_PURE_PYTHON", "") not in ("", "0"):
    unavailable = "FABRICMON_PURE_PYTHON is set"
else:
    try:
        from collector import _speedups
    except ImportError as e:  # not built: no compiler at install
        unavailable = f"not built ({e})"
    else:
        fast_values, deltas, port_row = _speedups.fast_values, _speedups.deltas, _speedups.port_row

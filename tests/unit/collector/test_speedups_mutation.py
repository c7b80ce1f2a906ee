"""The C fast paths when Python code they run empty the caller's ``updates`` list (issue 28, 9).

``fast_values`` runs Python code in the middle of a call: a dict key's ``__eq__`` during the slot
lookup, and the ``__del__`` of a row item it replaces. Either can empty the ``updates`` list
while the C walks it. It used to walk a pointer into that list's items (freed memory: ASan
reports a heap-use-after-free); it now walks a tuple of its own, so it reads every update it was
given. ``optics_pairs`` runs a key's ``__eq__`` the same way, and walks a tuple too. Each case
runs in a child interpreter, so the crash it once was fails one test, not the run.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from collector import speedups

ROOT = Path(__file__).resolve().parents[3]

SETUP = """
import gc
from collector import speedups
from tests.support.gnmi_fuzz import path_bytes, raw_update

keys = [path_bytes(f"state/counters/c{i}") for i in range(40)]
updates = [raw_update(k, b"\\x18" + bytes([i])) for i, k in enumerate(keys)]

def churn():
    # reuse the freed memory, as a busy collector would
    junk = [bytearray(64) for _ in range(2000)]
    del junk
    gc.collect()

class Key(bytes):
    # a dict key whose comparison, run by the C's lookup, empties the updates mid-call
    __hash__ = bytes.__hash__

    def __eq__(self, other):
        updates.clear()
        churn()
        return bytes.__eq__(self, other)
"""

BY_EQ = """
slots = {Key(keys[0]): 0, **{k: i for i, k in enumerate(keys) if i}}
row = [None] * 40
print(speedups.fast_values(updates, slots, row), row == list(range(40)))
"""

BY_DEL = """
class Old:
    def __del__(self):
        updates.clear()
        churn()

slots = {k: i for i, k in enumerate(keys)}
row = [Old()] + [None] * 39
print(speedups.fast_values(updates, slots, row), row == list(range(40)))
"""


OPTICS_BY_EQ = """
acts = {Key(keys[0]): (0,), **{k: (i,) for i, k in enumerate(keys) if i}}
pairs = speedups.optics_pairs(updates, acts)
print(len(pairs), pairs == [((i,), i) for i in range(40)])
"""

OPTICS_SLOTS_BY_EQ = """
layout = {Key(keys[0]): 1, **{k: (i % 8) * 8 + 1 for i, k in enumerate(keys) if i}}  # uints, the last kept
got = speedups.optics_slots(updates, layout, ((0.0, 0.0),) * 8)
print(len(keys), got == [32 + slot for slot in range(8)])
"""
CASES = [BY_EQ, BY_DEL, OPTICS_BY_EQ, OPTICS_SLOTS_BY_EQ]
CASE_IDS = ["key-eq", "row-item-del", "optics-key-eq", "optics-slots-key-eq"]


@pytest.mark.skipif(speedups.fast_values is None, reason="the C extension is not built")
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_fast_values_reads_every_update_when_the_list_is_emptied_during_the_call(case: str) -> None:
    code = textwrap.dedent(SETUP) + textwrap.dedent(case)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert (done.returncode, done.stdout.strip()) == (0, "40 True"), done.stderr[-2000:]

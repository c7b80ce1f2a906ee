"""Loading fabricmon's C extensions (built by hatch_build.py), or saying why they are not in use.

Every extension has a Python (or asyncpg) path that does the same work: the callers run it when
:func:`load` returns None. ``FABRICMON_PURE_PYTHON=1`` in the environment refuses them all, so a
benchmark or a bug report can compare the two.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def load(name: str, abi: int) -> tuple[ModuleType | None, str]:
    """(the extension module, "") or (None, why it is not in use). ``abi``: the ``ABI`` constant the
    caller was written for; a module built from an older source (an editable install not rebuilt
    after a pull) has another, and is not used rather than called with the wrong arguments."""
    if os.environ.get("FABRICMON_PURE_PYTHON", "") not in ("", "0"):
        return None, "FABRICMON_PURE_PYTHON is set"
    try:
        module = importlib.import_module(name)
    except ImportError as e:  # not built: no compiler at install
        return None, f"not built ({e})"
    built = getattr(module, "ABI", None)
    if built != abi:
        return None, f"built from another version of its source (ABI {built}, want {abi}): run make setup"
    return module, ""


__all__ = ["load"]

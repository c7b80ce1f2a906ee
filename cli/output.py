"""Human or JSON output for commands, chosen by the global ``--json`` flag."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any


def emit(as_json: bool, data: Any, human: Callable[[], str] | str | None = None) -> None:
    """Print ``data`` as JSON, or its human rendering (a string or a function returning one)."""
    if as_json:
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
        return
    if human is None:
        text = "\n".join(f"{k}: {v}" for k, v in data.items()) if isinstance(data, dict) else str(data)
    else:
        text = human() if callable(human) else human
    sys.stdout.write(text.rstrip("\n") + "\n")


def table(rows: list[tuple[str, Any]], width: int | None = None) -> str:
    """Two aligned columns, for summaries."""
    w = width or max((len(k) for k, _ in rows), default=0)
    return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)

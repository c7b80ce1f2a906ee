"""Waiting, from synchronous tests, for a condition that a real process will make true."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def until(cond: Callable[[], T | None], within_s: float, what: Callable[[], str]) -> T:
    """The first truthy value of ``cond()``, polled every 0.25 s; AssertionError with ``what()`` after ``within_s``."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if got := cond():
            return got
        time.sleep(0.25)
    raise AssertionError(f"not within {within_s} s: {what()}")

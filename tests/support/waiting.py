"""Waiting for a condition that a real process, server or task will make true: the one ``until``.

``until`` (async) and ``until_sync`` (threads, subprocesses) poll ``cond`` until it returns a
truthy value, and return that value; past the deadline they raise ``AssertionError`` naming what
was awaited. ``cond`` may be a coroutine function for ``until`` (a query, an HTTP call).
``what`` is a string, or a callable that describes the state at the deadline (its last report).
``cond`` raising one of ``ignoring`` (a server not listening yet: ``OSError``) counts as not yet.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")

Describe = str | Callable[[], str]
Errors = tuple[type[Exception], ...]


def _say(what: Describe) -> str:
    return what if isinstance(what, str) else what()


@overload
async def until(cond: Callable[[], Awaitable[T | None]], within_s: float, what: Describe = ..., *,
                every_s: float = ..., ignoring: Errors = ...) -> T: ...  # fmt: skip
@overload
async def until(cond: Callable[[], T | None], within_s: float, what: Describe = ..., *,
                every_s: float = ..., ignoring: Errors = ...) -> T: ...  # fmt: skip
async def until(cond: Callable[[], Any], within_s: float, what: Describe = "the condition", *,
                every_s: float = 0.05, ignoring: Errors = ()) -> Any:  # fmt: skip
    """The first truthy value of ``cond()`` (awaited if it is awaitable), polled every ``every_s``."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            got = cond()
            if inspect.isawaitable(got):
                got = await got
        except ignoring:
            got = None
        if got:
            return got
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {within_s:g} s: {_say(what)}")
        await asyncio.sleep(every_s)


def until_sync(cond: Callable[[], T | None], within_s: float, what: Describe = "the condition", *,
               every_s: float = 0.25, ignoring: Errors = ()) -> T:  # fmt: skip
    """As :func:`until`, blocking: for tests that wait on a subprocess or a thread."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            got = cond()
        except ignoring:
            got = None
        if got:
            return got
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {within_s:g} s: {_say(what)}")
        time.sleep(every_s)

"""One owner for a service's background tasks: started in a block, cancelled and awaited when it
ends, and every failure logged, never swallowed.

:func:`owned_tasks` has :class:`asyncio.TaskGroup`'s semantics (it is one underneath): a task
that fails cancels its siblings and the block, and its exception is raised from the ``async
with`` once every task has stopped. What it adds: leaving the block *cancels* the tasks still
running (a service's loops run until stopped, a TaskGroup would wait for them forever), each
failure is logged with its traceback as it happens, under the owner's name, and a lone failure is
raised as itself rather than wrapped in an :class:`ExceptionGroup` (several are raised as one).

For a task owned by an object across calls (started in ``start()``, stopped in ``close()``),
where no block spans its life, :func:`stop_task` cancels, awaits and logs in the same way.

Waiting with a timeout is :func:`fabric.waits.wait_event` or ``asyncio.timeout``; ruff bans
``asyncio.wait_for`` (pyproject.toml), whose cancellation race on 3.11 these replace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


class OwnedTasks:
    """The tasks of one :func:`owned_tasks` block."""

    def __init__(self, owner: str, group: asyncio.TaskGroup, logger: logging.Logger) -> None:
        self.owner = owner
        self._group = group
        self._log = logger
        self._tasks: list[asyncio.Task[Any]] = []

    def start(self, coro: Coroutine[Any, Any, T], name: str) -> asyncio.Task[T]:
        """Run ``coro`` as a task of this block."""
        task = self._group.create_task(self._logged(coro, name), name=name)
        self._tasks.append(task)
        return task

    @property
    def tasks(self) -> tuple[asyncio.Task[Any], ...]:
        """Every task started in the block, in order."""
        return tuple(self._tasks)

    def cancel(self) -> None:
        """Cancel every task still running (the block's end does it too). A task already being
        cancelled is not cancelled again: that would interrupt its cleanup."""
        for task in self._tasks:
            if not task.done() and not task.cancelling():
                task.cancel()

    async def _logged(self, coro: Coroutine[Any, Any, T], name: str) -> T:
        try:
            return await coro
        except asyncio.CancelledError:
            raise
        except BaseException:
            self._log.exception("%s: task %s failed", self.owner, name)
            raise


@contextlib.asynccontextmanager
async def owned_tasks(owner: str, logger: logging.Logger | None = None) -> AsyncIterator[OwnedTasks]:
    """A block whose tasks (:meth:`OwnedTasks.start`) are cancelled and awaited when it ends, however
    it ends. A task that fails is logged (``logger``, this module's by default) and cancels the
    others and the block; its exception is raised once all have stopped."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = OwnedTasks(owner, group, logger or log)
            try:
                yield tasks
            finally:
                tasks.cancel()
    except BaseExceptionGroup as group_error:
        if len(group_error.exceptions) == 1:
            raise group_error.exceptions[0] from None
        raise


async def stop_task(
    task: asyncio.Task[Any] | None, what: str, logger: logging.Logger | None = None, *, grace_s: float = 0.0
) -> None:
    """Cancel ``task`` (after up to ``grace_s`` for it to end by itself, once told to stop) and wait
    for it to end; a failure it ended with is logged with its traceback, not raised (a close must go
    on closing). The caller's own cancellation propagates."""
    if task is None:
        return
    if grace_s > 0 and not (await asyncio.wait([task], timeout=grace_s))[0]:
        (logger or log).warning("%s did not stop within %g s; cancelled", what, grace_s)
    if not task.done() and not task.cancelling():  # cancelled already (under a lock, say): not twice
        task.cancel()
    await asyncio.wait([task])  # never raises the task's outcome, nor swallows our own cancellation
    if not task.cancelled() and (exc := task.exception()) is not None:
        (logger or log).error("%s failed", what, exc_info=exc)


__all__ = ["OwnedTasks", "owned_tasks", "stop_task"]

"""What acts on stored scheduler actions while an analyzer leads, as the analyzer sees it.

The analyzer never imports the schedulers: the composition root (:mod:`cli.compose`) hands it an
object of this shape (:class:`schedulers.service.Schedulers`), which the analyzer runs beside its
rounds for each term as leader, wakes when a sync stored actions, and closes on a clean stop.
"""

from __future__ import annotations

from typing import Protocol

from store.scheduler_actions import Policy


class ActionExecutors(Protocol):
    """Leader-scoped executors of the ``scheduler_actions`` rows the analyzer stores."""

    @property
    def policies(self) -> tuple[Policy, ...]:
        """What each scheduler is asked to do: the rows a transition stores for it."""
        ...

    def notify(self) -> None:
        """Actions were stored: execute them now."""

    async def run(self) -> None:
        """Execute until cancelled (returns at once when there is nothing to run)."""

    async def close(self) -> None:
        """A clean stop: the action in flight is run and recorded before :meth:`run` is cancelled."""


class NoExecutors:
    """No scheduler configured: no actions stored, nothing to run."""

    policies: tuple[Policy, ...] = ()

    def notify(self) -> None:
        """Nothing to wake."""

    async def run(self) -> None:
        """Nothing to run."""

    async def close(self) -> None:
        """Nothing in flight."""


__all__ = ["ActionExecutors", "NoExecutors"]

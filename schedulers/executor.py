"""Runs stored scheduler actions against Slurm, once each, in order (:mod:`store.scheduler_actions`).

For each action, the executor first reads the nodes' state from Slurm and decides per node, so
that what it does is right for the cluster as it is *now*, not as it was when the incident fired:

* **drain**: nothing if the incident resolved before Slurm could be reached, or needs review by
  now (a circuit breaker tripped meanwhile). Per node: one already drained with a fabricmon
  reason is left as it is; one someone else drained (an admin, a health check), or that is down,
  failed, in maintenance, rebooting or powered off, is never touched, its reason kept; the
  others get ``State=DRAIN Reason="fabricmon: <incident> <summary>"``: running jobs keep
  running, no new ones land. If that would leave more than ``max_drained_nodes`` nodes drained
  by fabricmon at once, nothing is drained, and the row is ``withheld`` with why
  (``review_reason``): the analyzer's next round reads it and turns the incident to review
  (:mod:`analyzer.withheld`), a fleet-wide circuit breaker beside the per-incident one;
* **resume**: only nodes that are drained, whose reason is still fabricmon's, that are not down
  or otherwise out of service, and that no other firing incident's drain still holds get
  ``State=RESUME``; a node an admin drained (or drained again after us) stays drained;
* **checkpoint**: ``scancel --signal=<checkpoint_signal> --batch <job>`` for each running job on
  the hosts (while the incident is open and needs no review: a stored checkpoint of an incident
  resolved, or held back by a breaker, since is never replayed, ``done``/``withheld``). Each
  job's signal is recorded as it is sent, so a retry never signals a job twice, and a job that
  ended meanwhile is noted, not a failure.

``dry_run`` does the reading and the deciding, records the commands it would run (status
``dry_run``) and runs none. A controller that is away leaves the action pending, retried with
backoff (1 s doubling to ``retry_max_s``), so a drain decided during a slurmctld outage lands
when it returns, once. A refusal is retried ``max_attempts_refused`` times, 5 s apart doubling
(at most ``retry_max_s``), then ``failed``; so is an unexpected error, so one bad row cannot hold
up the queue. Every write-back is fenced by the claim (status and attempt): an executor whose
lease ran out cannot overwrite what the next one recorded; the lease is renewed before each
command.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fabric.waits import wait_event
from schedulers.config import SlurmConfig
from schedulers.node_map import NodeMap, node_map
from schedulers.slurm import Operation, SlurmClient, SlurmCommands, SlurmNode, SlurmRefused, SlurmUnavailable
from store import scheduler_actions as outbox
from store.db import UNAVAILABLE_ERRORS, Pool, PostgresError
from store.scheduler_actions import REASON_PREFIX, ActionRow

log = logging.getLogger(__name__)
SCHEDULER = "slurm"
_IDLE_POLL_S = 5.0
#: The first wait after a refusal or an unexpected error (then doubling, at most retry_max_s).
_REFUSAL_DELAY_S = 5.0
_DB_ERRORS: tuple[type[BaseException], ...] = (PostgresError, *UNAVAILABLE_ERRORS)


@dataclass(slots=True)
class ExecutorStats:
    """What the executor did (for ``/metrics``)."""

    executed: int = 0
    dry_runs: int = 0
    withheld: int = 0
    failed: int = 0
    retries: int = 0
    unavailable: bool = False
    last_error: str | None = None
    by_action: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Plan:
    status: outbox.Status
    nodes: tuple[str, ...] = ()
    ops: tuple[Operation, ...] = ()
    result: dict[str, Any] = field(default_factory=dict)
    #: Why a fleet breaker withheld it (recorded: the analyzer's next round turns the incident to review).
    why: str = ""


def retry_delay_s(attempts: int, max_s: float, rng: random.Random | None = None) -> float:
    """1 s doubling per attempt, at most ``max_s``, +/-20 % jitter."""
    base = min(max_s, 2.0 ** max(0, attempts - 1))
    return base * (rng or random).uniform(0.8, 1.2)


class SlurmExecutor:
    """Claims the oldest pending Slurm action, plans it against Slurm's state, runs and records it."""

    def __init__(
        self,
        pool: Pool,
        config: SlurmConfig,
        client: SlurmClient | None = None,
    ) -> None:
        self.pool = pool
        self.config = config
        self.slurm: SlurmClient = client or SlurmCommands(config)
        self.map: NodeMap = node_map(config.node_map)
        self.stats = ExecutorStats()
        self._wake = asyncio.Event()
        self._closing = False
        self._idle = asyncio.Event()
        self._idle.set()

    def notify(self) -> None:
        """Look for new actions now (the analyzer stored some)."""
        self._wake.set()

    @property
    def lease_s(self) -> float:
        """How long a claim (or a renewal before each command) holds the row: one command's deadline
        and the plan's reads, with room to spare."""
        return 3 * self.config.command_timeout_s + 10

    async def close(self, grace_s: float | None = None) -> None:
        """Claim nothing more and wait (at most ``grace_s``, by default one lease) for the action in
        flight to be run and recorded: cancelled between a command and its record, the audit would
        keep the row pending and the next executor would find the work done and record nothing."""
        self._closing = True
        self._wake.set()
        await wait_event(self._idle, self.lease_s if grace_s is None else grace_s)

    async def run(self) -> None:
        """Execute actions until cancelled (or, after :meth:`close`, until the one in flight is done)."""
        while not self._closing:
            self._idle.clear()
            try:
                busy = await self.step()
            except _DB_ERRORS as exc:
                log.warning("scheduler actions: database unavailable: %s", exc)
                busy = False
            except Exception:  # a bug costs a retry of this action, never the loop
                log.exception("scheduler actions: unexpected failure")
                busy = False
            finally:
                self._idle.set()
            if busy:
                continue
            await self._sleep()

    async def _sleep(self) -> None:
        due = await _quiet(outbox.next_due(self.pool, SCHEDULER))
        wait = _IDLE_POLL_S
        if due is not None:
            wait = max(0.05, min(wait, (due - datetime.now(UTC)).total_seconds()))
        self._wake.clear()
        if self._closing:  # closed while it stepped: no wait
            return
        await wait_event(self._wake, wait)

    async def step(self) -> bool:
        """Run the head action if it is due; whether the queue moved."""
        row = await outbox.claim(self.pool, SCHEDULER, self.lease_s)
        if row is None:
            return False
        try:
            plan = await self.plan(row)
            if plan.status == "pending":  # something to run
                await self._execute(row, plan)
            else:
                await self._finish(row, plan)
        except SlurmUnavailable as exc:
            delay = retry_delay_s(row.attempts, self.config.retry_max_s)
            self.stats.retries += 1
            if not self.stats.unavailable:
                log.warning("Slurm unavailable (%s): %s of incident %s waits, retrying", exc, row.action, row.alert_id)
            self.stats.unavailable, self.stats.last_error = True, str(exc)
            await outbox.record(self.pool, row, "pending", error=str(exc), retry_in_s=delay)
            return False
        except SlurmRefused as exc:
            await self._refused(row, str(exc), "Slurm refused")
            return True
        except _DB_ERRORS:
            raise  # the lease runs out and the row is claimed again
        except Exception as exc:  # a bug costs this row a few retries, never the queue behind it
            log.exception("scheduler actions: unexpected failure on %s of incident %s", row.action, row.alert_id)
            await self._refused(row, f"internal error: {type(exc).__name__}: {exc}", "unexpected failure of")
            return True
        if self.stats.unavailable:
            log.info("Slurm reachable again")
        self.stats.unavailable = False
        return True

    async def _refused(self, row: ActionRow, error: str, what: str) -> None:
        self.stats.last_error = error
        if row.refusals + 1 >= self.config.max_attempts_refused:
            self.stats.failed += 1
            log.error("%s %s of incident %s %d times, giving up: %s", what, row.action, row.alert_id,
                      row.refusals + 1, error)  # fmt: skip
            await outbox.record(self.pool, row, "failed", error=error, refused=True)
            return
        log.warning("%s %s of incident %s: %s; retrying", what, row.action, row.alert_id, error)
        delay = min(self.config.retry_max_s, _REFUSAL_DELAY_S * 2.0**row.refusals)
        await outbox.record(self.pool, row, "pending", error=error, retry_in_s=delay, refused=True)

    async def plan(self, row: ActionRow) -> _Plan:
        """What to do for each host, from Slurm's state now (reads only)."""
        nodes_of = {h: self.map.node(h) for h in row.hosts}
        result: dict[str, Any] = {h: "no Slurm node for this server" for h, n in nodes_of.items() if n is None}
        wanted = {n: h for h, n in nodes_of.items() if n is not None}
        if row.action in ("drain", "checkpoint"):
            state, review = await outbox.incident_state(self.pool, row.alert_id)
            if state == "resolved":
                # decided while Slurm was away, and the incident is over (its resume follows): acting
                # now would only take the node out, or interrupt the job, for nothing
                for host in wanted.values():
                    result[host] = f"the incident resolved before Slurm could be reached: no {row.action}"
                return _Plan("done", (), (), result)
            if review:  # a breaker (per incident, fleet budget, checkpoint) held it back since
                done = "drained" if row.action == "drain" else "signalled"
                for host in wanted.values():
                    result[host] = f"the incident needs review by now (a circuit breaker tripped): not {done}"
                return _Plan("withheld", (), (), result)
        if row.action == "checkpoint":
            return await self._plan_checkpoint(row, wanted, result)
        state_now = await self.slurm.nodes()
        for node in [n for n in wanted if n not in state_now]:
            result[wanted.pop(node)] = f"{node}: not a node of this Slurm cluster"
        if row.action == "drain":
            return self._plan_drain(row, wanted, state_now, result)
        return await self._plan_resume(row, wanted, state_now, result)

    def _plan_drain(
        self, row: ActionRow, wanted: dict[str, str], state: dict[str, SlurmNode], result: dict[str, Any]
    ) -> _Plan:
        todo: list[str] = []
        for node, host in wanted.items():
            s = state[node]
            if s.drained and s.reason.startswith(REASON_PREFIX):
                result[host] = f"{node}: already drained by fabricmon ({s.reason})"
            elif s.drained:
                result[host] = f"{node}: drained by someone else, left alone ({s.reason or 'no reason'})"
            elif s.out_of_service:
                result[host] = (
                    f"{node}: {'+'.join(sorted(s.state))}, left to Slurm and its admins ({s.reason or 'no reason'})"
                )
            else:
                todo.append(node)
        ours = {n for n, s in state.items() if s.drained and s.reason.startswith(REASON_PREFIX)}
        if todo and len(ours | set(todo)) > self.config.max_drained_nodes:
            why = (
                f"fleet circuit breaker: draining {len(todo)} more would leave {len(ours | set(todo))} nodes "
                f"drained by fabricmon, more than max_drained_nodes ({self.config.max_drained_nodes}); "
                "a person decides"
            )
            for node in todo:
                result[wanted[node]] = f"{node}: withheld: {why}"
            return _Plan("withheld", tuple(todo), (), result, why)
        for node in todo:
            result[wanted[node]] = f"{node}: drained"
        return self._act(todo, [Operation("drain", tuple(todo), row.reason)] if todo else [], result)

    async def _plan_resume(
        self, row: ActionRow, wanted: dict[str, str], state: dict[str, SlurmNode], result: dict[str, Any]
    ) -> _Plan:
        held = await outbox.held_elsewhere(self.pool, row.alert_id, SCHEDULER, list(wanted.values()))
        todo: list[str] = []
        for node, host in wanted.items():
            s = state[node]
            if not s.drained:
                result[host] = f"{node}: not drained, nothing to resume"
            elif s.out_of_service:
                result[host] = f"{node}: {'+'.join(sorted(s.state))}, left to Slurm and its admins"
            elif not s.reason.startswith(REASON_PREFIX):
                result[host] = f"{node}: drained by someone else since, left drained ({s.reason or 'no reason'})"
            elif host in held:
                result[host] = f"{node}: still drained for incident {held[host]}"
            else:
                todo.append(node)
                result[host] = f"{node}: resumed"
        return self._act(todo, [Operation("resume", tuple(todo))] if todo else [], result)

    async def _plan_checkpoint(self, row: ActionRow, wanted: dict[str, str], result: dict[str, Any]) -> _Plan:
        sig = self.config.checkpoint_signal
        if sig is None:
            return _Plan("done", (), (), {**result, "*": "checkpoint_signal is not set: nothing sent"})
        jobs = [j for j in await self.slurm.jobs() if set(j.nodes) & set(wanted)]
        for host in wanted.values():
            result.setdefault(host, "no running job")
        ops = []
        sent = set(row.commands)  # signals an earlier attempt sent: never twice
        for j in jobs:
            op = Operation("signal", job_id=j.job_id, signal=sig)
            if self.slurm.describe(op) in sent:
                note = f"job {j.job_id}: SIG{sig} to its batch step (sent by an earlier attempt)"
            else:
                ops.append(op)
                note = f"job {j.job_id}: SIG{sig} to its batch step"
            for node in set(j.nodes) & set(wanted):
                result[wanted[node]] = note
        if not ops and sent:
            return _Plan("done", (), (), result)
        return self._act(sorted({n for j in jobs for n in j.nodes if n in wanted}), ops, result)

    def _act(self, nodes: Sequence[str], ops: Sequence[Operation], result: dict[str, Any]) -> _Plan:
        if not ops:
            return _Plan("done", tuple(nodes), (), result)
        if self.config.dry_run:
            return _Plan("dry_run", tuple(nodes), tuple(ops), {h: f"dry run: {r}" for h, r in result.items()})
        return _Plan("pending", tuple(nodes), tuple(ops), result)

    async def _execute(self, row: ActionRow, plan: _Plan) -> None:
        ran: list[str] = list(row.commands) if row.action == "checkpoint" else []
        result = dict(plan.result)
        for op in plan.ops:
            if not await outbox.renew(self.pool, row, self.lease_s):
                log.warning("%s of incident %s: the claim was lost (lease ran out); stopping", row.action, row.alert_id)
                return
            try:
                await self.slurm.execute(op)  # unavailable: the row stays pending, planned afresh next time
            except SlurmRefused as exc:
                if op.kind != "signal":
                    raise
                # a job that ended between the listing and the signal: noted, the others still signalled
                for host, note in result.items():
                    if isinstance(note, str) and note.startswith(f"job {op.job_id}:"):
                        result[host] = f"job {op.job_id}: not signalled: {exc}"
                continue
            ran.append(self.slurm.describe(op))
            if op.kind == "signal":  # recorded at once: a retry after a failure must not signal it again
                await outbox.note_commands(self.pool, row, ran)
        self.stats.executed += 1
        self.stats.by_action[row.action] = self.stats.by_action.get(row.action, 0) + 1
        log.warning("Slurm %s for incident %s: %s", row.action, row.alert_id, "; ".join(ran) or "nothing to run")
        await outbox.record(self.pool, row, "done", nodes=plan.nodes, commands=ran, result=result)

    async def _finish(self, row: ActionRow, plan: _Plan) -> None:
        commands = [self.slurm.describe(op) for op in plan.ops]
        if plan.status == "dry_run":
            self.stats.dry_runs += 1
            log.warning(
                "dry run: Slurm %s for incident %s would run: %s", row.action, row.alert_id, "; ".join(commands)
            )
        elif plan.status == "withheld":
            self.stats.withheld += 1
            log.error("Slurm %s for incident %s withheld: %s", row.action, row.alert_id,
                      plan.why or next(iter(plan.result.values()), ""))  # fmt: skip
        if plan.status == "done" and row.action == "checkpoint":
            commands = list(row.commands)  # what earlier attempts sent
        await outbox.record(
            self.pool, row, plan.status, nodes=plan.nodes, commands=commands, result=plan.result,
            review_reason=plan.why or None,
        )  # fmt: skip


async def _quiet(coro: Any) -> Any:
    try:
        return await coro
    except _DB_ERRORS:
        return None


__all__ = ["SCHEDULER", "ExecutorStats", "SlurmExecutor", "retry_delay_s"]

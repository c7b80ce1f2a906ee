"""``fabricmon collect --workers N|auto``: N shard workers under one supervisor, one /metrics for all.

Each worker is a child process running ``fabricmon collect --shard I/N --metrics-listen
127.0.0.1:<port>`` with the supervisor's config: exactly what a person could start by hand, with
its own heartbeat row, spool and drain. The supervisor

* forwards each worker's stdout and stderr line by line, prefixed ``[shard I]``;
* restarts a worker that exits without being asked to (whatever its exit code), after a backoff
  (:class:`Backoff`: 1 s doubling to 30 s, back to 1 s once a worker ran 60 s), counts it
  (``fabricmon_collector_worker_restarts_total{shard}``) and logs it;
* on stop (SIGTERM or SIGINT, handled by the CLI) sends SIGTERM to every worker, waits up to
  ``drain_timeout_s`` (60 s) for each to drain its writer and spool, SIGKILLs the stragglers and
  reports whether all drained cleanly;
* serves one ``/metrics``: every worker's, fetched concurrently at scrape time (a short timeout
  each), one HELP/TYPE per family, each sample labelled ``shard="I"``, and its own
  ``fabricmon_collector_workers{state}``, ``fabricmon_collector_worker_up{shard}`` and restarts.

Workers run in a process group of their own, so a terminal's Ctrl-C reaches the supervisor only
and the drain is its to order. A supervisor killed outright (SIGKILL, the OOM killer) leaves no
orphans: each worker asks the kernel for SIGTERM when its parent dies (:func:`die_with_parent`,
PR_SET_PDEATHSIG; set by the worker itself at start-up, as ``preexec_fn`` is unsafe in a process
with threads) and drains on its own.

Errors: :class:`WorkersError` (``FabricmonError``, ``ValueError``): a bad worker count, a metrics
address that cannot be bound, a supervisor that is already gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TextIO

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector, CollectorRegistry

from collector.config import MAX_WORKERS
from fabric.errors import FabricmonError
from fabric.tasks import owned_tasks, stop_task
from fabric.waits import wait_event

log = logging.getLogger(__name__)

#: Set in a worker's environment to the supervisor's pid: the worker dies with it (:func:`die_with_parent`).
PARENT_ENV = "FABRICMON_PARENT_PID"
DRAIN_TIMEOUT_S = 60.0
SCRAPE_TIMEOUT_S = 2.0
#: How long a worker's output may trail its exit (a grandchild holding the pipe must not hold us).
_PIPE_GRACE_S = 1.0
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_OWN_FAMILIES = ("fabricmon_collector_workers", "fabricmon_collector_worker_up", "fabricmon_collector_worker_restarts")


class WorkersError(FabricmonError, ValueError):
    """Bad ``--workers``, an unusable metrics address, or a supervisor already gone."""


def auto_workers(cpus: int | None = None) -> int:
    """``auto``: the usable cores (this process's CPU affinity) minus one for the rest, 1 to 64."""
    usable = len(os.sched_getaffinity(0)) if cpus is None else cpus
    return max(1, min(MAX_WORKERS, usable - 1))


def parse_workers(value: int | str) -> int:
    """``--workers`` / ``collector.workers``: ``auto`` or 1…64."""
    if value == "auto":
        return auto_workers()
    text = str(value).strip()
    if not text.isdigit() or not 1 <= int(text) <= MAX_WORKERS:
        raise WorkersError(f"--workers must be 1 to {MAX_WORKERS} or 'auto', got {value!r}")
    return int(text)


@dataclass(slots=True)
class Backoff:
    """Delays between restarts of one worker: ``initial_s`` doubling to ``cap_s``; a worker that ran
    ``healthy_s`` before it exited starts again from ``initial_s``."""

    initial_s: float = 1.0
    cap_s: float = 30.0
    healthy_s: float = 60.0
    _next_s: float | None = None

    def after_exit(self, ran_s: float) -> float:
        """The delay before restarting a worker that exited after running ``ran_s``."""
        if self._next_s is None or ran_s >= self.healthy_s:
            self._next_s = self.initial_s
        delay = self._next_s
        self._next_s = min(self.cap_s, delay * 2)
        return delay


def die_with_parent(parent_pid: int, sig: int = signal.SIGTERM) -> None:
    """Have the kernel send ``sig`` to this process when its parent dies (Linux; elsewhere nothing).

    Called by a worker at start-up. The parent may have died before the call took effect, so it
    is checked after: then :class:`WorkersError`.
    """
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    zero = ctypes.c_ulong(0)
    if libc.prctl(ctypes.c_int(_PR_SET_PDEATHSIG), ctypes.c_ulong(sig), zero, zero, zero) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_PDEATHSIG): {os.strerror(err)}")
    if os.getppid() != parent_pid:
        raise WorkersError(f"the supervisor (pid {parent_pid}) is gone")


# --- one /metrics out of many ------------------------------------------------------------------


def parse_metrics(text: str) -> list[Metric]:
    """A worker's /metrics body as families; ValueError when it is not the text format."""
    return list(text_string_to_metric_families(text))


def merge_metrics(by_shard: Mapping[str, Iterable[Metric]], label: str = "shard") -> list[Metric]:
    """The families of every shard as one set: a family once (the first shard's HELP and TYPE),
    each sample labelled ``label=<shard>`` (replacing a label of that name). A family another
    shard declares with another type cannot be merged: those samples are left out."""
    merged: dict[str, Metric] = {}
    for shard, families in by_shard.items():
        for family in families:
            into = merged.get(family.name)
            if into is None:
                into = merged[family.name] = Metric(family.name, family.documentation, family.type, family.unit)
            elif into.type != family.type:
                log.debug("family %s is a %s in shard %s, a %s before: left out", family.name, family.type,
                          shard, into.type)  # fmt: skip
                continue
            for s in family.samples:
                into.samples.append(s._replace(labels={**s.labels, label: shard}))
    return list(merged.values())


class _Families(Collector):
    def __init__(self, families: Sequence[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families


def render(families: Sequence[Metric]) -> bytes:
    """The Prometheus text format of ``families`` (prometheus_client's own writer)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(families))
    return generate_latest(registry)


# --- the supervisor -----------------------------------------------------------------------------


@dataclass(eq=False)
class Worker:
    """One shard's slot: the process currently running it, and its history."""

    shard: int
    count: int
    backoff: Backoff
    proc: asyncio.subprocess.Process | None = None
    #: The worker's own /metrics port on 127.0.0.1 (a new one at every start).
    port: int = 0
    #: time.monotonic() of the current process's start.
    started: float = 0.0
    restarts: int = 0
    state: str = "starting"
    pipes: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.shard}/{self.count}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None


#: The command line of a worker (its shard, count and port are set when it is called).
Command = Callable[[Worker], Sequence[str]]


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now (a worker that loses the race exits and is restarted)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def describe_exit(code: int | None) -> str:
    if code is None:
        return "did not start"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
    return f"exited with {code}"


class Supervisor:
    """Runs one worker per shard in ``shards`` (of ``count``), keeps them running, drains them."""

    def __init__(
        self,
        shards: Sequence[int],
        count: int,
        command: Command,
        *,
        env: Callable[[Worker], Mapping[str, str]] | None = None,
        say: Callable[[str], None] | None = None,
        drain_timeout_s: float = DRAIN_TIMEOUT_S,
        scrape_timeout_s: float = SCRAPE_TIMEOUT_S,
        backoff: Callable[[], Backoff] = Backoff,
    ) -> None:
        self.workers = [Worker(i, count, backoff()) for i in shards]
        self.command = command
        self.env = env or (lambda _: {})
        self.say = say or log.info
        self.drain_timeout_s = drain_timeout_s
        self.scrape_timeout_s = scrape_timeout_s
        self._stopping = asyncio.Event()
        self._spawning = asyncio.Lock()
        self._session: aiohttp.ClientSession | None = None

    async def run(self, stop: asyncio.Event) -> bool:
        """Keep every worker running until ``stop`` is set; then drain them. True: all drained cleanly.
        A keeper ends only on stop, or by a bug: then every worker is drained and the run is not
        clean (the bug is logged with its traceback by the task owner, fabric/tasks.py)."""
        clean = False
        keepers: list[asyncio.Task[None]] = []
        try:
            async with owned_tasks("worker supervisor", log) as tasks:
                keepers = [tasks.start(self._keep(w), f"worker-{w.shard}") for w in self.workers]
                stopper = tasks.start(stop.wait(), "stop")
                try:
                    await asyncio.wait([stopper, *keepers], return_when=asyncio.FIRST_COMPLETED)
                finally:
                    clean = await self._drain()
        except Exception:
            if not any(t.done() and not t.cancelled() and t.exception() is not None for t in keepers):
                raise  # not a keeper's bug: the drain's own
            return False
        return clean

    async def _keep(self, w: Worker) -> None:
        """Start the worker, and again after each exit nobody asked for."""
        while True:
            code: int | None = None
            async with self._spawning:
                if self._stopping.is_set():
                    return
                try:
                    await self._spawn(w)
                except OSError as exc:
                    log.warning("shard %s: cannot start a worker: %s", w.name, exc)
            if w.proc is not None and w.state == "running":
                code = await w.proc.wait()
                await self._pipes_done(w)
            if self._stopping.is_set():
                return
            delay = w.backoff.after_exit(time.monotonic() - w.started)
            w.state = "restarting"
            pid = f" (pid {w.proc.pid})" if w.proc is not None and code is not None else ""
            log.warning("shard %s: worker%s %s; restarting in %.3g s", w.name, pid, describe_exit(code), delay)
            await wait_event(self._stopping, delay)
            if not self._stopping.is_set():
                w.restarts += 1

    async def _spawn(self, w: Worker) -> None:
        w.state, w.started = "starting", time.monotonic()
        w.port = free_port()
        env = {**os.environ, PARENT_ENV: str(os.getpid()), **self.env(w)}
        proc = await asyncio.create_subprocess_exec(
            *self.command(w),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            process_group=0,  # Ctrl-C is the supervisor's: it orders the drain
        )
        w.proc, w.state = proc, "running"
        prefix = f"[shard {w.shard}] "
        w.pipes = [
            asyncio.create_task(_forward(proc.stdout, lambda: sys.stdout, prefix), name=f"worker-{w.shard}-out"),
            asyncio.create_task(_forward(proc.stderr, lambda: sys.stderr, prefix), name=f"worker-{w.shard}-err"),
        ]
        again = f", restart {w.restarts}" if w.restarts else ""
        self.say(f"shard {w.name}: worker pid {proc.pid} started (metrics on 127.0.0.1:{w.port}{again})")

    async def _pipes_done(self, w: Worker) -> None:
        _, late = await asyncio.wait(w.pipes, timeout=_PIPE_GRACE_S) if w.pipes else (set(), set())
        for task in late:
            await stop_task(task, f"forwarding {task.get_name()}", log)

    async def _drain(self) -> bool:
        """SIGTERM every worker, wait for each up to the deadline, SIGKILL the rest."""
        self._stopping.set()
        async with self._spawning:  # no start in flight from here on, and none after
            running = [w for w in self.workers if w.running]
        for w in running:
            assert w.proc is not None
            with contextlib.suppress(ProcessLookupError):
                w.proc.send_signal(signal.SIGTERM)
        waits: dict[asyncio.Future[int], Worker] = {
            asyncio.ensure_future(w.proc.wait()): w for w in running if w.proc is not None
        }
        late: set[asyncio.Future[int]] = set()
        if waits:
            _, late = await asyncio.wait(waits, timeout=self.drain_timeout_s)
        clean = True
        for fut in late:
            w = waits[fut]
            assert w.proc is not None
            log.error("shard %s: worker pid %d did not drain within %.0f s: killed", w.name, w.proc.pid,
                      self.drain_timeout_s)  # fmt: skip
            with contextlib.suppress(ProcessLookupError):
                w.proc.kill()
            await w.proc.wait()
            clean = False
        for w in running:
            assert w.proc is not None
            # Killed by SIGTERM itself: it was stopped before it installed its handler, with nothing read yet.
            if w.proc.returncode not in (0, -signal.SIGTERM):
                log.error("shard %s: worker pid %d %s while draining", w.name, w.proc.pid,
                          describe_exit(w.proc.returncode))  # fmt: skip
                clean = False
            await self._pipes_done(w)
        for w in self.workers:
            w.state = "stopped"
        return clean

    # --- metrics -------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def serving(self, listen: str | None) -> AsyncIterator[None]:
        """Serve the merged ``/metrics`` on ``listen`` (``host:port``) while the block runs; None: not at all."""
        if listen is None:
            yield
            return

        async def metrics(_: web.Request) -> web.Response:
            return web.Response(body=await self.scrape(), headers={"Content-Type": CONTENT_TYPE_LATEST})

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        host, _, port = listen.rpartition(":")
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.scrape_timeout_s))
        try:
            try:
                await web.TCPSite(runner, host.strip("[]") or "127.0.0.1", int(port)).start()
            except OSError as exc:
                raise WorkersError(f"cannot listen on {listen}: {exc.strerror or exc}") from None
            self.say(f"metrics of every worker on http://{listen}/metrics")
            yield
        finally:
            await runner.cleanup()
            await self._session.close()
            self._session = None

    async def scrape(self) -> bytes:
        """Every running worker's /metrics, merged, and the supervisor's own."""
        session = self._session or aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.scrape_timeout_s))
        try:
            asked = [w for w in self.workers if w.running and w.port]
            got = await asyncio.gather(*(self._fetch(session, w) for w in asked))
        finally:
            if session is not self._session:
                await session.close()
        answered = {str(w.shard): families for w, families in zip(asked, got, strict=True) if families is not None}
        families = [f for f in merge_metrics(answered) if f.name not in _OWN_FAMILIES]
        return render([*families, *self.own_metrics({int(s) for s in answered})])

    async def _fetch(self, session: aiohttp.ClientSession, w: Worker) -> list[Metric] | None:
        try:
            async with session.get(f"http://127.0.0.1:{w.port}/metrics") as r:
                if r.status != 200:
                    return None
                return parse_metrics(await r.text())
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:  # starting, wedged, or not our format
            log.debug("shard %s: no metrics: %s: %s", w.name, type(exc).__name__, exc)
            return None

    def own_metrics(self, answered: set[int]) -> list[Metric]:
        """The supervisor's families; ``answered``: the shards whose /metrics answered this scrape."""
        states = GaugeMetricFamily("fabricmon_collector_workers", "shard workers by state", labels=["state"])
        for state in ("running", "restarting"):
            states.add_metric([state], sum(1 for w in self.workers if w.state == state))
        up = GaugeMetricFamily(
            "fabricmon_collector_worker_up",
            "1 when the shard's worker runs and its /metrics answered this scrape",
            labels=["shard"],
        )
        restarts = CounterMetricFamily(
            "fabricmon_collector_worker_restarts", "times the shard's worker exited unasked and was started again",
            labels=["shard"],
        )  # fmt: skip
        for w in self.workers:
            up.add_metric([str(w.shard)], 1 if w.running and w.shard in answered else 0)
            restarts.add_metric([str(w.shard)], w.restarts)
        return [states, up, restarts]


async def _forward(reader: asyncio.StreamReader | None, out: Callable[[], TextIO], prefix: str) -> None:
    """Copy ``reader`` to ``out()`` line by line behind ``prefix``, to its end. Never stops reading
    early: a worker whose pipe fills up would block on its next log line."""
    if reader is None:
        return
    while True:
        try:
            chunk = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:  # the end, perhaps after a last line without newline
            chunk = exc.partial
            if not chunk:
                return
        except asyncio.LimitOverrunError as exc:  # a very long line: pass it on in pieces
            chunk = await reader.read(exc.consumed or 1)
        with contextlib.suppress(OSError, ValueError):  # our own stdout gone: keep draining the pipe
            stream = out()
            stream.write(prefix + chunk.decode(errors="replace").rstrip("\n") + "\n")
            stream.flush()

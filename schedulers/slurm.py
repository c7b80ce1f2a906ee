"""Slurm through its own commands: ``squeue``/``sinfo`` to read, ``scontrol``/``scancel`` to act.

The commands are run directly (no shell), with ``SLURM_CONF`` from the environment or the
config, each under ``command_timeout_s``. What goes wrong falls in two classes, because they call
for opposite reactions:

* :class:`SlurmUnavailable`: the controller cannot be reached (slurmctld stopped, a network
  partition, a timeout). Retry with backoff, and never read it as an answer: ``squeue --json``
  exits 0 with an empty job list and an ``errors`` entry when slurmctld is away, which a naive
  reader would take for "every job finished";
* :class:`SlurmRefused`: slurmctld answered no (an unknown node name, a permission, a bad
  argument) or the command is missing. Retrying the same request a few times is harmless, but it
  will not heal.

The JSON shapes differ between Slurm releases (22.05's ``openapi/v0.0.38``: plain numbers and a
state string with ``state_flags``; 23.02 and later: ``{"set", "infinite", "number"}`` objects and
state lists); :func:`parse_jobs` and :func:`parse_nodes` read both.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, Protocol

from fabric.errors import FabricmonError
from schedulers.config import SlurmConfig
from schedulers.hostlist import HostlistError, compress, expand

log = logging.getLogger(__name__)

#: What Slurm's clients print when the controller is not there (slurm_strerror texts).
_OUTAGE_TEXTS = (
    "unable to contact slurm controller",
    "socket timed out",
    "connection refused",
    "zero bytes were transmitted",
    "communication connection failure",
    "transport endpoint is not connected",
    "slurmctld not responding",
    "connection reset",
    "network is unreachable",
    "no route to host",
    "temporary failure in name resolution",
    "protocol authentication error",  # munged is down on this host or the controller's
    "munge encode failed",
    "standby mode",  # an HA controller pair mid-failover
)
#: States in which a node belongs to Slurm or its admins, whatever its reason: fabricmon never
#: drains such a node (that would replace the reason) nor resumes it (that would end the state).
OUT_OF_SERVICE = frozenset(
    {"DOWN", "FAIL", "FAILING", "MAINT", "REBOOT", "REBOOT_REQUESTED", "REBOOT_ISSUED", "POWERED_DOWN",
     "POWERING_DOWN", "POWER_DOWN", "POWERING_UP", "FUTURE"}
)  # fmt: skip


class SlurmError(FabricmonError):
    """A Slurm command that did not do what was asked."""


class SlurmUnavailable(SlurmError):
    """The controller cannot be reached now: try again later."""


class SlurmRefused(SlurmError):
    """Slurm answered no, or the command cannot run here: retrying will not help."""


@dataclass(frozen=True, slots=True)
class SlurmJob:
    """A running job as ``squeue`` shows it."""

    job_id: str
    name: str
    nodes: tuple[str, ...]
    started_at: datetime | None
    time_limit_min: float | None  # None: no limit (INFINITE)


@dataclass(frozen=True, slots=True)
class SlurmNode:
    """A node's state words (upper case: ``IDLE``, ``ALLOCATED``, ``DRAIN``, ``DOWN``...) and reason."""

    name: str
    state: frozenset[str]
    reason: str

    @property
    def drained(self) -> bool:
        """Draining or drained: no new job lands on it."""
        return "DRAIN" in self.state or bool(self.state & {"DRAINED", "DRAINING"})

    @property
    def out_of_service(self) -> bool:
        """Down, failed, in maintenance, rebooting or powered off: Slurm's or an admin's, not ours."""
        return bool(self.state & OUT_OF_SERVICE)


@dataclass(frozen=True, slots=True)
class SlurmReservation:
    """A reservation as ``scontrol show reservation`` (or slurmrestd) shows it."""

    name: str
    nodes: tuple[str, ...]
    start: datetime
    end: datetime
    flags: frozenset[str]

    @property
    def maintenance(self) -> bool:
        """Whether it carries the ``MAINT`` flag (planned work on its nodes)."""
        return "MAINT" in self.flags


@dataclass(frozen=True, slots=True)
class Operation:
    """One change to make in Slurm: drain or resume nodes, or signal a job's batch step."""

    kind: Literal["drain", "resume", "signal"]
    nodes: tuple[str, ...] = ()
    reason: str = ""
    job_id: str = ""
    signal: str = ""


class SlurmClient(Protocol):
    """What the executor and the discovery need of Slurm (its commands, or slurmrestd)."""

    async def jobs(self, max_nodes: int = 1_000_000) -> list[SlurmJob]: ...

    async def nodes(self) -> dict[str, SlurmNode]: ...

    async def reservations(self) -> list[SlurmReservation]: ...

    async def execute(self, op: Operation) -> None: ...

    def describe(self, op: Operation) -> str: ...


def _number(value: Any) -> float | None:
    """A Slurm JSON number: plain (v0.0.38) or ``{"set", "infinite", "number"}`` (v0.0.39+)."""
    if isinstance(value, dict):
        if value.get("infinite") or not value.get("set", True):
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _words(value: Any) -> set[str]:
    if isinstance(value, str):
        return {w for w in value.upper().replace("+", " ").split() if w}
    if isinstance(value, list):
        return {str(w).upper() for w in value if isinstance(w, str)}
    return set()


def _checked(doc: Any, what: str) -> dict[str, Any]:
    """The document, or :class:`SlurmUnavailable` when it carries errors (slurmctld away)."""
    if not isinstance(doc, dict):
        raise SlurmRefused(f"{what}: expected a JSON object")
    errors = doc.get("errors") or []
    if errors:
        texts = "; ".join(
            str(e.get("description") or e.get("error") or e) if isinstance(e, dict) else str(e) for e in errors
        )
        # 22.05 says only "Unspecified error" when it could not reach slurmctld, and exits 0
        raise SlurmUnavailable(f"{what} --json reported an error ({texts}): slurmctld is unreachable or failing")
    return doc


def parse_jobs(doc: Any, max_nodes: int = 1_000_000) -> list[SlurmJob]:
    """The running jobs of an ``squeue --json`` document."""
    jobs: list[SlurmJob] = []
    for j in _checked(doc, "squeue").get("jobs") or []:
        if not isinstance(j, dict) or "RUNNING" not in _words(j.get("job_state")):
            continue
        try:
            nodes = expand(str(j.get("nodes") or ""), max_nodes)
        except HostlistError as exc:
            log.warning("Slurm job %s: %s; skipped", j.get("job_id"), exc)
            continue
        start = _number(j.get("start_time"))
        jobs.append(
            SlurmJob(
                job_id=str(j.get("job_id")),
                name=str(j.get("name") or ""),
                nodes=tuple(nodes),
                started_at=datetime.fromtimestamp(start, UTC) if start else None,
                time_limit_min=_number(j.get("time_limit")),
            )
        )
    return jobs


def parse_nodes(doc: Any) -> dict[str, SlurmNode]:
    """Every node of an ``sinfo --json`` (or slurmrestd ``/nodes``) document, by name."""
    out: dict[str, SlurmNode] = {}
    nodes = _checked(doc, "sinfo").get("nodes")
    if not isinstance(nodes, list) or not nodes:
        # never "an empty cluster": every host would read "not a Slurm node" and nothing be drained
        raise SlurmRefused("Slurm's node list is missing or empty (an unsupported JSON shape?)")
    for n in nodes:
        if not isinstance(n, dict) or not isinstance(n.get("name"), str):
            continue
        words = _words(n.get("state")) | _words(n.get("state_flags"))
        out[n["name"]] = SlurmNode(n["name"], frozenset(words), str(n.get("reason") or ""))
    return out


#: A reservation without an end (``Duration=UNLIMITED``) lasts this long from its start.
OPEN_ENDED = timedelta(days=3650)
_FIELD = re.compile(r"(?:^|\s)([A-Za-z]+)=(.*?)(?=\s[A-Za-z]+=|$)")


def _slurm_time(text: str) -> datetime | None:
    """A time ``scontrol`` printed under ``TZ=UTC`` (``2026-05-01T22:00:00``), or None."""
    try:
        t = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t


def parse_reservations_text(text: str, max_nodes: int = 1_000_000) -> list[SlurmReservation]:
    """The reservations of ``scontrol -o show reservation`` run with ``TZ=UTC`` (one per line;
    22.05's scontrol has no ``--json``, and this text is the same in every release since)."""
    out: list[SlurmReservation] = []
    for line in text.splitlines():
        fields = {m.group(1): m.group(2).strip() for m in _FIELD.finditer(line)}
        name = fields.get("ReservationName")
        if not name:
            continue  # "No reservations in the system"
        start = _slurm_time(fields.get("StartTime", ""))
        if start is None:
            log.warning("Slurm reservation %s: unreadable StartTime %r; skipped", name, fields.get("StartTime"))
            continue
        end = _slurm_time(fields.get("EndTime", "")) or start + OPEN_ENDED
        nodes = fields.get("Nodes", "")
        try:
            hosts = expand(nodes, max_nodes) if nodes and nodes != "(null)" else []
        except HostlistError as exc:
            log.warning("Slurm reservation %s: %s; skipped", name, exc)
            continue
        flags = frozenset(f.strip().upper() for f in fields.get("Flags", "").split(",") if f.strip())
        out.append(SlurmReservation(name, tuple(hosts), start, end, flags))
    return out


def parse_reservations(doc: Any, max_nodes: int = 1_000_000) -> list[SlurmReservation]:
    """The reservations of a slurmrestd ``/reservations`` document (v0.0.38's plain numbers, or
    the ``{"set", "infinite", "number"}`` objects of later versions)."""
    out: list[SlurmReservation] = []
    for r in _checked(doc, "reservations").get("reservations") or []:
        if not isinstance(r, dict) or not isinstance(r.get("name"), str):
            continue
        start, end = _number(r.get("start_time")), _number(r.get("end_time"))
        if start is None:
            continue
        begins = datetime.fromtimestamp(start, UTC)
        try:
            hosts = expand(str(r.get("node_list") or ""), max_nodes)
        except HostlistError as exc:
            log.warning("Slurm reservation %s: %s; skipped", r["name"], exc)
            continue
        ends = datetime.fromtimestamp(end, UTC) if end is not None else begins + OPEN_ENDED
        out.append(SlurmReservation(r["name"], tuple(hosts), begins, ends, frozenset(_words(r.get("flags")))))
    return out


def is_outage(text: str) -> bool:
    """Whether a Slurm client's error text says the controller is away (not that it said no)."""
    low = text.lower()
    return any(t in low for t in _OUTAGE_TEXTS)


class SlurmCommands:
    """The four commands, run with the configured ``SLURM_CONF`` and deadline."""

    def __init__(self, config: SlurmConfig) -> None:
        self.config = config
        self._env = dict(os.environ)
        if config.slurm_conf is not None:
            self._env["SLURM_CONF"] = str(config.slurm_conf)

    def argv(self, program: str, *args: str) -> list[str]:
        """The command line (a program from ``bin_dir`` when set)."""
        path = str(Path(self.config.bin_dir) / program) if self.config.bin_dir else program
        return [path, *args]

    async def run(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
        """Run one command (``env``: variables to set for it); its stdout, or
        :class:`SlurmUnavailable` / :class:`SlurmRefused`."""
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={**self._env, **(env or {})},
            )
        except FileNotFoundError:
            raise SlurmRefused(
                f"{argv[0]}: not found (install slurm-client, or set schedulers.slurm.bin_dir)"
            ) from None
        except OSError as exc:
            raise SlurmRefused(f"{argv[0]}: cannot run: {exc.strerror}") from None
        try:
            async with asyncio.timeout(self.config.command_timeout_s):
                out, err = await proc.communicate()
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise SlurmUnavailable(f"{argv[0]}: no answer within {self.config.command_timeout_s:g} s") from None
        except asyncio.CancelledError:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            raise
        text = err.decode(errors="replace").strip()
        if proc.returncode != 0:
            detail = text.splitlines()[-1] if text else f"exit status {proc.returncode}"
            if is_outage(text):
                raise SlurmUnavailable(f"{argv[0]}: {detail}")
            raise SlurmRefused(f"{argv[0]}: {detail}")
        return out.decode(errors="replace")

    async def json(self, program: str, *args: str) -> Any:
        text = await self.run(self.argv(program, *args))
        try:
            return await asyncio.to_thread(json.loads, text)  # a big cluster's squeue: not on the loop
        except ValueError:
            raise SlurmRefused(f"{program} {' '.join(args)} printed no JSON (is this Slurm 21.08 or newer?)") from None

    async def jobs(self, max_nodes: int = 1_000_000) -> list[SlurmJob]:
        """The running jobs."""
        return parse_jobs(await self.json("squeue", "--json"), max_nodes)

    async def nodes(self) -> dict[str, SlurmNode]:
        """Every node's state and reason: ``sinfo --json`` (21.08 to 23.02), or where its document
        has no node list (23.11 and later group nodes by partition), ``scontrol --json show nodes``."""
        doc = await self.json("sinfo", "--json")
        if isinstance(doc, dict) and "nodes" not in doc and not doc.get("errors"):
            doc = await self.json("scontrol", "--json", "show", "nodes")
        return parse_nodes(doc)

    async def reservations(self) -> list[SlurmReservation]:
        """Every reservation: ``scontrol -o show reservation``, its times printed in UTC."""
        argv = self.argv("scontrol", "-o", "show", "reservation")
        return parse_reservations_text(await self.run(argv, env={"TZ": "UTC"}))

    def op_argv(self, op: Operation) -> list[str]:
        """The command line of an operation."""
        if op.kind == "drain":
            return self.argv(
                "scontrol", "update", f"NodeName={compress(op.nodes)}", "State=DRAIN", f"Reason={op.reason}"
            )
        if op.kind == "resume":
            return self.argv("scontrol", "update", f"NodeName={compress(op.nodes)}", "State=RESUME")
        return self.argv("scancel", f"--signal={op.signal}", "--batch", op.job_id)

    async def execute(self, op: Operation) -> None:
        await self.run(self.op_argv(op))

    def describe(self, op: Operation) -> str:
        return render(self.op_argv(op))


def render(argv: Sequence[str]) -> str:
    """A command line as a person would type it (for the audit and the logs)."""
    out = []
    for a in argv:
        if not a or any(c in a for c in " \t\"'$`\\;&|<>()*?[]{}#~"):
            key, eq, value = a.partition("=")
            a = f'{key}="{value}"' if eq and " " in value and '"' not in value else json.dumps(a)
        out.append(a)
    return " ".join(out)


__all__ = [
    "Operation",
    "SlurmClient",
    "SlurmCommands",
    "SlurmError",
    "SlurmJob",
    "SlurmNode",
    "SlurmRefused",
    "SlurmReservation",
    "SlurmUnavailable",
    "is_outage",
    "parse_jobs",
    "parse_nodes",
    "parse_reservations",
    "parse_reservations_text",
    "render",
]

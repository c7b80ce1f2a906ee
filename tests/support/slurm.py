"""A real Slurm cluster on loopback for the tests: munged, slurmctld and one slurmd per node.

Debian's Slurm (22.05) runs so as root: every node is ``NodeHostname=localhost`` with a ``Port=``
of its own, and ``slurmd -N <node>`` plays it. Everything (munge key and socket, state, spool, logs,
``slurm.conf``) lives under one temporary directory, ``SLURM_CONF`` points at it, and nothing of
the machine's own Slurm set-up is read or changed. The daemons run in the foreground as children
of the test process, so a test can stop slurmctld (SIGTERM, or SIGSTOP) and start it again with
its state.

The tests read the cluster through Slurm's text output (``scontrol -o show node``), not through
the JSON fabricmon parses, so a parsing mistake in fabricmon cannot hide from them.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.ports import free_port

PROGRAMS = ("munged", "slurmctld", "slurmd", "squeue", "sinfo", "scontrol", "sbatch", "scancel")


def missing_programs() -> list[str]:
    """Slurm and munge programs this machine lacks (``make setup`` installs them)."""
    return [p for p in PROGRAMS if shutil.which(p) is None and not Path("/usr/sbin", p).exists()]


def _program(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


@dataclass(frozen=True)
class NodeView:
    """A node as ``scontrol -o show node`` prints it."""

    name: str
    state: str  # e.g. IDLE, ALLOCATED+DRAIN, IDLE+DRAIN
    reason: str

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.state


@dataclass
class SlurmCluster:
    root: Path
    nodes: tuple[str, ...]
    ctld_port: int
    node_ports: dict[str, int]
    env: dict[str, str] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    #: Where slurmctld's log stood at the last :meth:`reset`: the ``*_logged`` counts start there.
    log_from: int = 0

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def ctld_log(self) -> Path:
        return self.root / "slurmctld.log"

    # --- set-up ------------------------------------------------------------------------------

    def write_config(self, extra_config: Sequence[str] = ()) -> None:
        """``slurm.conf``; ``extra_config``: more lines (e.g. ``AuthAltTypes=auth/jwt``)."""
        r = self.root
        lines = [
            "ClusterName=fabricmon-test",
            "SlurmctldHost=localhost",
            f"SlurmctldPort={self.ctld_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            f"AuthInfo=socket={r / 'munge.sock'}",
            "CredType=cred/munge",
            f"StateSaveLocation={r / 'state'}",
            f"SlurmdSpoolDir={r / 'spool'}/%n",
            f"SlurmctldPidFile={r / 'slurmctld.pid'}",
            f"SlurmdPidFile={r / 'slurmd'}.%n.pid",
            f"SlurmctldLogFile={self.ctld_log}",
            f"SlurmdLogFile={r / 'slurmd'}.%n.log",
            "SlurmctldDebug=info",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "ReturnToService=2",
            "MpiDefault=none",
            "JobCompType=jobcomp/none",
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
            "SchedulerType=sched/builtin",
            "SlurmdTimeout=60",
            "MessageTimeout=5",
        ]
        for n in self.nodes:
            lines.append(f"NodeName={n} NodeHostname=localhost Port={self.node_ports[n]} CPUs=1 RealMemory=100")
        lines.append("PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
        lines.extend(extra_config)
        self.conf.write_text("\n".join(lines) + "\n")

    def start_munge(self) -> None:
        key = self.root / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        subprocess.run(
            [
                _program("munged"),
                "--force",
                f"--key-file={key}",
                f"--socket={self.root / 'munge.sock'}",
                f"--pid-file={self.root / 'munged.pid'}",
                f"--seed-file={self.root / 'munge.seed'}",
                f"--log-file={self.root / 'munged.log'}",
            ],
            check=True,
            timeout=20,
        )

    def start_ctld(self) -> None:
        """slurmctld in the foreground, with the state it saved (if any)."""
        with (self.root / "slurmctld.out").open("ab") as out:
            self.procs["slurmctld"] = subprocess.Popen(
                [_program("slurmctld"), "-D"], env=self.env, stdout=out, stderr=subprocess.STDOUT
            )
        self.wait(lambda: self.try_run("sinfo", "-h") is not None, 20, "slurmctld to answer")

    def stop_ctld(self) -> None:
        """Stop slurmctld (SIGTERM: it saves its state) and wait until it is gone."""
        p = self.procs.pop("slurmctld")
        p.send_signal(signal.SIGCONT)
        p.terminate()
        p.wait(timeout=30)

    def start_slurmds(self) -> None:
        for n in self.nodes:
            with (self.root / f"slurmd.{n}.out").open("ab") as out:
                self.procs[f"slurmd:{n}"] = subprocess.Popen(
                    [_program("slurmd"), "-D", "-N", n], env=self.env, stdout=out, stderr=subprocess.STDOUT
                )
        self.wait(lambda: self.responding() == set(self.nodes), 30, "every slurmd registered")

    def close(self) -> None:
        if "slurmctld" in self.procs:  # end the jobs first: killed slurmds would leave their steps running
            self.try_run("scancel", "--user=root", "--full")
            with contextlib.suppress(AssertionError):
                self.wait(lambda: not (self.try_run("squeue", "-h") or "").strip(), 15, "no jobs left")
        for p in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGCONT)
                p.kill()
        for p in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=20)
        subprocess.run(
            [_program("munged"), f"--socket={self.root / 'munge.sock'}", "--stop"],
            timeout=20,
            check=False,
            capture_output=True,
        )

    # --- reading and driving it ---------------------------------------------------------------

    def run(self, *argv: str, timeout: float = 30) -> str:
        out = subprocess.run(
            [_program(argv[0]), *argv[1:]], env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )
        if out.returncode != 0:
            raise AssertionError(f"{' '.join(argv)}: exit {out.returncode}: {out.stderr.strip()}")
        return out.stdout

    def try_run(self, *argv: str) -> str | None:
        try:
            return self.run(*argv, timeout=15)
        except (AssertionError, subprocess.TimeoutExpired):
            return None

    def node(self, name: str) -> NodeView:
        text = self.run("scontrol", "-o", "show", "node", name)
        state = re.search(r"\bState=(\S+)", text)
        reason = re.search(r"\bReason=(.*?)(?: \[[^\]]*@[^\]]*\])?\s*$", text)
        assert state is not None, text
        return NodeView(name, state.group(1), reason.group(1).strip() if reason else "")

    def responding(self) -> set[str]:
        out = self.try_run("sinfo", "-h", "-N", "-o", "%N %T") or ""
        return {n for n, st in (line.split()[:2] for line in out.splitlines() if line.strip()) if not st.endswith("*")
                and st not in ("unknown", "down", "not_responding")}  # fmt: skip

    def sbatch(self, nodes: Sequence[str], seconds: int = 600, time_limit_min: int = 120, name: str = "train") -> str:
        out = self.run(
            "sbatch", "--parsable", f"--output={self.root}/job-%j.out", "-J", name, "-t", str(time_limit_min),
            "-w", ",".join(nodes),
            "-N", str(len(nodes)), "--wrap", f"sleep {seconds}",
        )  # fmt: skip
        job = out.strip().split(";")[0]
        self.wait(lambda: self.job_state(job) == "RUNNING", 30, f"job {job} running")
        return job

    def job_state(self, job: str) -> str | None:
        out = self.try_run("squeue", "-h", "-j", job, "-o", "%T")
        return out.strip() if out else None

    def drain(self, node: str, reason: str) -> None:
        self.run("scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}")

    def _log(self) -> str:
        if not self.ctld_log.exists():
            return ""
        with self.ctld_log.open("rb") as f:
            f.seek(self.log_from)
            return f.read().decode(errors="replace")

    def drains_logged(self, node: str) -> int:
        """How many times slurmctld drained ``node`` since the last reset (its log, across restarts)."""
        return len(re.findall(rf"update_node: node {re.escape(node)} state set to DRAIN", self._log()))

    def resumes_logged(self, node: str) -> int:
        """How many times slurmctld resumed ``node`` since the last reset."""
        return len(
            re.findall(rf"update_node: node {re.escape(node)} state set to (?:IDLE|ALLOCATED|MIXED)", self._log())
        )

    def reset(self) -> None:
        """No jobs, every node idle and undrained (between tests)."""
        self.try_run("scancel", "--user=root", "--full")
        for n in self.nodes:
            if self.node(n).drained:
                self.run("scontrol", "update", f"NodeName={n}", "State=RESUME")
        self.wait(lambda: not (self.try_run("squeue", "-h") or "").strip(), 30, "no jobs left")
        self.wait(lambda: self.responding() == set(self.nodes), 30, "every node responding")
        self.log_from = self.ctld_log.stat().st_size if self.ctld_log.exists() else 0

    @staticmethod
    def wait(cond: object, within_s: float, what: str) -> None:
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            if callable(cond) and cond():
                return
            time.sleep(0.2)
        raise AssertionError(f"not within {within_s} s: {what}")


@contextlib.contextmanager
def slurm_cluster(root: Path, nodes: Sequence[str], extra_config: Sequence[str] = ()) -> Iterator[SlurmCluster]:
    """A running cluster of ``nodes`` under ``root`` (a fresh directory), torn down afterwards;
    ``extra_config``: lines added to ``slurm.conf``."""
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)  # munged wants its socket's directory searchable by everyone
    (root / "state").mkdir()
    (root / "spool").mkdir()
    c = SlurmCluster(root, tuple(nodes), free_port(), {n: free_port() for n in nodes})
    c.env = {**os.environ, "SLURM_CONF": str(c.conf)}
    c.write_config(extra_config)
    try:
        c.start_munge()
        c.start_ctld()
        c.start_slurmds()
        yield c
    finally:
        c.close()

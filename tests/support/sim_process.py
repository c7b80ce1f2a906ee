"""``fabricmon sim`` as a real process for the tests, the config it writes for collectors, and its
fault control endpoint."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml


@dataclass(frozen=True)
class AppliedFault:
    """A fault the simulator process accepted (what ``FabricState.apply`` returns, as far as tests go)."""

    id: str


@dataclass(frozen=True)
class SimControl:
    """The ``/faults`` endpoint of a simulator process: apply and clear faults, as the demo does."""

    url: str

    def apply(self, fault: dict[str, Any]) -> AppliedFault:
        req = urllib.request.Request(
            f"{self.url}/faults",
            data=json.dumps(fault).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            return AppliedFault(str(json.loads(r.read())["id"]))

    def clear(self, fault_id: str) -> bool:
        req = urllib.request.Request(f"{self.url}/faults/{fault_id}", method="DELETE")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return bool(r.status == 204)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return False
            raise


@dataclass(frozen=True)
class SimProcess:
    """What a started simulator process said: its ready line and the config it wrote."""

    ready: dict[str, Any]
    config: dict[str, Any]

    @property
    def control(self) -> SimControl:
        where = self.ready.get("control")
        assert where, "the simulator was started without --control"
        return SimControl(f"http://{where}")


@contextlib.contextmanager
def started_sim(d: Path, args: Sequence[str], switches: int) -> Iterator[SimProcess]:
    """Run ``fabricmon sim ARGS`` (its stderr in ``d/sim.err``) until the block ends, once it says
    it serves ``switches`` switches."""
    written = d / "sim.yaml"
    with (d / "sim.err").open("w") as err:
        sim = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "sim", *args, "--write-config", str(written), "--json"],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    try:
        assert sim.stdout is not None
        text = ""
        while not text.rstrip().endswith("}"):
            line = sim.stdout.readline()
            assert line, f"the simulator exited: {(d / 'sim.err').read_text()}"
            text += line
        ready = json.loads(text)
        assert ready["switches"] == switches
        yield SimProcess(ready, yaml.safe_load(written.read_text()))
    finally:
        sim.terminate()
        sim.communicate(timeout=20)


@contextlib.contextmanager
def sim_process(d: Path, args: Sequence[str], switches: int) -> Iterator[dict[str, Any]]:
    """:func:`started_sim`, yielding only the config it wrote (``--write-config``)."""
    with started_sim(d, args, switches) as sim:
        yield sim.config


#: ``fabricmon sim --gpus 512`` on free ports: 8 leaves over gNMI, 12 spines and superspines over SNMP.
SIM_512_ARGS = ("--gpus", "512", "--gnmi", "127.0.0.1:0", "--snmp", "127.0.0.1:0", "--control", "")


def sim_512(tmp_path_factory: pytest.TempPathFactory, name: str, switches: int) -> Iterator[dict[str, Any]]:
    """The body of a module fixture: the 512-GPU simulator as a process, the config it writes."""
    with sim_process(tmp_path_factory.mktemp(name), SIM_512_ARGS, switches) as config:
        yield config

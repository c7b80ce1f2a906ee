"""``fabricmon sim`` as a real process for the tests, and the config it writes for collectors."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml


@contextlib.contextmanager
def sim_process(d: Path, args: Sequence[str], switches: int) -> Iterator[dict[str, Any]]:
    """Run ``fabricmon sim ARGS`` (its stderr in ``d/sim.err``) until the block ends; yield the
    config it wrote (``--write-config``), once it says it serves ``switches`` switches."""
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
        assert json.loads(text)["switches"] == switches
        yield yaml.safe_load(written.read_text())
    finally:
        sim.terminate()
        sim.communicate(timeout=20)

"""``fabricmon record`` and ``sim --replay``: a recording served again yields the same stream."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from config.loader import load_config
from fabric.model import FabricParams
from simulator.recorder import RecordError, RecordOptions, record
from simulator.recording import RecordingError, read_recording
from simulator.replay import NOT_REPLAYED, ReplayView
from simulator.runner import SimOptions, start_sim, stop_sim


def _values(path: Path) -> dict[tuple[str, str], list[str]]:
    """(interface, leaf) → the values in arrival order, from a recording."""
    out: dict[tuple[str, str], list[str]] = defaultdict(list)
    _, entries = read_recording(path)
    for entry in entries:
        if not entry.response.HasField("update"):
            continue
        n = entry.response.update
        port = next((e.key.get("name") or e.key.get("interface-id") for e in n.prefix.elem if e.key), "")
        for u in n.update:
            leaf = "/".join(e.name + "".join(f"[{k}={v}]" for k, v in sorted(e.key.items())) for e in u.path.elem)
            out[(port, leaf)].append(str(u.val).strip())
    return out


async def test_record_then_replay_round_trip(tmp_path: Path) -> None:
    sim = await start_sim(
        SimOptions(params=FabricParams(gpus=64, radix=16), gnmi="127.0.0.1:0", snmp=None, control=None)
    )
    first = tmp_path / "first.jsonl"
    try:
        assert sim.gnmi is not None
        opts = RecordOptions(
            address=f"127.0.0.1:{sim.gnmi.port}",
            switch="lf-g1-r1",
            out=first,
            duration_s=3.5,
            interval_s=1.0,
            tls=False,
        )
        result = await record(opts)
    finally:
        await stop_sim(sim)
    assert result.syncs == 1 and result.updates > 100
    header, _ = read_recording(first)
    assert header.switch == "lf-g1-r1"

    replay = await start_sim(SimOptions(replay=first, gnmi="127.0.0.1:0", snmp=None, control=None))
    second = tmp_path / "second.jsonl"
    try:
        assert replay.gnmi is not None and isinstance(replay.view, ReplayView)
        opts = RecordOptions(
            address=f"127.0.0.1:{replay.gnmi.port}",
            switch="lf-g1-r1",
            out=second,
            duration_s=3.5,
            interval_s=1.0,
            tls=False,
        )
        again = await record(opts)
        assert replay.view.skipped == 0  # every leaf known; the optics ones known and left out
        assert replay.view.not_replayed > 0
    finally:
        await stop_sim(replay)
    assert again.syncs == 1
    original, replayed = _values(first), _values(second)
    # The same leaves, and every replayed value is one the switch really sent.
    assert set(replayed) == {key for key in original if key[1] not in NOT_REPLAYED}
    shifted = {"state/counters/last-clear", "state/last-change"}  # moved to the present, by design
    for key, values in replayed.items():
        if key[1] in shifted:
            assert min(int(v.split()[-1]) for v in values) > max(int(v.split()[-1]) for v in original[key])
        else:
            assert set(values) <= set(original[key]), key
    # The replay moves on with time: busy counters take several recorded values.
    octets = replayed[("swp1", "state/counters/in-octets")]
    assert len(set(octets)) >= 2


async def test_unknown_target_is_a_clear_record_error(tmp_path: Path) -> None:
    sim = await start_sim(
        SimOptions(params=FabricParams(gpus=64, radix=16), gnmi="127.0.0.1:0", snmp=None, control=None)
    )
    try:
        assert sim.gnmi is not None
        opts = RecordOptions(
            address=f"127.0.0.1:{sim.gnmi.port}",
            switch="no-such-switch",
            out=tmp_path / "x.jsonl",
            duration_s=2,
            tls=False,
        )
        with pytest.raises(RecordError, match="NOT_FOUND"):
            await record(opts)
    finally:
        await stop_sim(sim)


async def test_nobody_listening(tmp_path: Path) -> None:
    opts = RecordOptions(address="127.0.0.1:9", switch="lf-g1-r1", out=tmp_path / "x.jsonl", timeout_s=1, tls=False)
    with pytest.raises(RecordError, match="no gNMI server answered"):
        await record(opts)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no JSON header"),
        ('{"format": "something-else"}\n', "not a fabricmon recording"),
        ('{"format": "fabricmon-gnmi-recording", "version": 9}\n', "version 9"),
    ],
)
def test_bad_recordings(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(RecordingError, match=message):
        read_recording(path)


def test_bad_entry_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    header = {"format": "fabricmon-gnmi-recording", "version": 1, "switch": "s", "started_ns": 1}
    path.write_text(json.dumps(header) + '\n{"recv_ns": 5, "update": {"timestamp": "x"}}\n')
    with pytest.raises(RecordingError, match=r"bad\.jsonl:2: bad entry"):
        list(read_recording(path)[1])


def _start_cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cli.main", "sim", *args, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_sim_cli_writes_a_working_config_and_stops_cleanly(tmp_path: Path) -> None:
    cfg = tmp_path / "sim.yaml"
    proc = _start_cli(
        "--gpus",
        "64",
        "--radix",
        "16",
        "--gnmi",
        "127.0.0.1:0",
        "--snmp",
        "127.0.0.1:0",
        "--control",
        "127.0.0.1:0",
        "--write-config",
        str(cfg),
    )
    try:
        assert proc.stdout is not None
        lines = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if line.startswith("}"):
                break
        ready = json.loads("".join(lines))
        config = load_config(cfg, env={})
        assert config.fabric.generate is not None and config.fabric.generate.gpus == 64
        by_protocol = {t.protocol: t for t in config.targets}
        assert by_protocol["gnmi"].address == ready["gnmi"] and by_protocol["gnmi"].switches == ["lf-*"]
        assert by_protocol["snmp"].address == ready["snmp"]
        out = subprocess.run(
            ["snmpget", "-v2c", "-c", "sp-r1-1", "-t", "2", "-r", "1", ready["snmp"], "1.3.6.1.2.1.1.5.0"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        assert "sp-r1-1" in out.stdout
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=20)


def test_record_refuses_credentials_over_plaintext(tmp_path: Path) -> None:
    with pytest.raises(RecordError, match="credentials would travel in plaintext"):
        RecordOptions(address="h:1", switch="s", out=tmp_path / "x", tls=False, username="admin")
    RecordOptions(
        address="h:1", switch="s", out=tmp_path / "x", tls=False, username="a", allow_plaintext_credentials=True
    )
    assert RecordOptions(address="h:1", switch="s", out=tmp_path / "x", username="admin").tls  # TLS by default


def test_sim_cli_bad_arguments_are_one_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cli.main", "sim", "--gpus", "12"], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "multiple of" in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "cli.main", "sim", "--replay", "/nonexistent.jsonl"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2 and "cannot open recording" in proc.stderr and "Traceback" not in proc.stderr

"""``fabricmon topology`` and ``fabricmon slo`` through the real entry point."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cli.main import main
from fabric.inventory import load_inventory
from fabric.model import FabricParams
from fabric.topology import build_aipod


def test_topology_summary_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topology", "--gpus", "16384", "--summary", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("gpus", "servers", "groups", "rails", "leaves", "spines", "superspines", "switches",
                "links", "group_gpus", "max_gpus", "oversubscription"):  # fmt: skip
        assert key in out
    assert out["gpus"] == 16384
    assert (out["servers"], out["groups"], out["leaves"], out["spines"]) == (2048, 32, 256, 256)
    assert (out["superspines"], out["switches"], out["ports"]) == (128, 640, 81920)
    assert out["group_gpus"] == 512
    assert out["max_gpus"] >= 16384
    assert out["oversubscription"] == 1.0


def test_topology_summary_human(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topology", "--gpus", "512", "--summary"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.split() == ["superspines", "4"] for line in lines)
    assert any(line.split() == ["oversubscription", "1.00"] for line in lines)


def test_topology_inventory_to_stdout(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["topology", "--gpus", "16", "--radix", "8"]) == 0
    captured = capsys.readouterr()
    path = tmp_path / "inv.yaml"
    path.write_text(captured.out)
    assert load_inventory(path) == build_aipod(FabricParams(gpus=16, radix=8))
    assert captured.err == ""


def test_topology_inventory_to_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "inv.yaml"
    assert main(["topology", "--gpus", "64", "--rails", "4", "--speed-gbps", "800", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"wrote {out}")
    assert load_inventory(out) == build_aipod(FabricParams(gpus=64, rails=4, speed_gbps=800))
    assert [p.name for p in tmp_path.iterdir()] == ["inv.yaml"]


def test_slo_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["slo", "--gpus", "8000", "--availability", "0.9999", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["p_interrupt"] == pytest.approx(0.551, abs=5e-4)
    assert out["p_interrupt_pct"] == pytest.approx(55.1, abs=0.05)
    assert (out["gpus"], out["availability"], out["months"]) == (8000, 0.9999, 1.0)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--gpus", "8000", "--availability", "0.9999"], "P(interrupt within 1 month) = 55.1%"),
        (["--gpus", "8000", "--availability", "0.999"], "P(interrupt within 1 month) = 99.97%"),
        (["--gpus", "1000", "--availability", "0.999", "--months", "3"], "P(interrupt within 3 months) = 95.0%"),
    ],
)
def test_slo_human(capsys: pytest.CaptureFixture[str], argv: list[str], expected: str) -> None:
    assert main(["slo", *argv]) == 0
    assert capsys.readouterr().out == expected + "\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["topology", "--gpus", "12"], "not a multiple of rails=8"),
        (["topology", "--gpus", "65536", "--summary"], "exceeds max_gpus=32768"),
        (["topology", "--gpus", "64", "--radix", "7"], "radix must be even"),
        (["topology", "--gpus", "16", "--out", "/nonexistent-dir/inv.yaml"], "cannot write"),
        (["slo", "--gpus", "8000", "--availability", "1.5"], r"availability must be in \(0, 1\]"),
        (["slo", "--gpus", "0", "--availability", "0.999"], "gpus must be an integer >= 1"),
        (["slo", "--gpus", "10", "--availability", "0.999", "--months", "-1"], "months must be"),
    ],
)
def test_bad_values_are_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert main(argv) != 0
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"fabricmon {argv[0]}: error: ")
    assert "Traceback" not in captured.err
    assert re.search(message, lines[0])

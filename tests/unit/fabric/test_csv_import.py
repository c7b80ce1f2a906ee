"""``fabricmon inventory import csv``: a spreadsheet's cabling plan, one clear error per bad row."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from fabric.csv_import import import_csv
from fabric.design import design_report
from fabric.errors import TopologyError
from fabric.inventory import load_inventory
from fabric.model import Endpoint, FabricParams, Role
from fabric.topology import build_aipod

PLAN = """\
a_node,a_port,b_node,b_port,speed_gbps
gpu-a01-n01,mlx5_0,leaf-a01,Ethernet1/1,400
gpu-a01-n01,mlx5_1,leaf-a02,Ethernet1/1,400
gpu-a01-n02,mlx5_0,leaf-a01,Ethernet1/5,400
gpu-a01-n02,mlx5_1,leaf-a02,Ethernet1/5,400
leaf-a01,Ethernet33/1,spine-r1-01,Ethernet0,800
leaf-a02,Ethernet33/1,spine-r2-01,et-0/0/1:2,800
spine-r1-01,Ethernet256,ssp-01,Ethernet1,800
spine-r2-01,et-0/0/9:0,ssp-01,Ethernet2,800
"""


def test_a_spreadsheet_becomes_a_rail_optimized_fabric() -> None:
    fabric, report = import_csv(PLAN, name="pod-a")
    assert report.undecided == [] and report.problems == []
    roles = {n: sw.role for n, sw in fabric.switches.items()}
    assert roles == {
        "leaf-a01": Role.LEAF, "leaf-a02": Role.LEAF, "spine-r1-01": Role.SPINE, "spine-r2-01": Role.SPINE,
        "ssp-01": Role.SUPERSPINE,
    }  # fmt: skip
    assert (fabric.switches["leaf-a02"].rail, fabric.switches["spine-r2-01"].rail) == (2, 2)
    assert fabric.nic("gpu-a01-n02", 2) == "mlx5_1" and fabric.label == "pod-a"
    assert fabric.peer(Endpoint("ssp-01", "Ethernet2")) == Endpoint("spine-r2-01", "et-0/0/9:0")
    assert design_report(fabric).clean


def test_role_patterns_decide_when_the_rows_are_not_lower_tier_first() -> None:
    flipped = "\n".join(
        ",".join(row.split(",")[2:4] + row.split(",")[0:2] + row.split(",")[4:]) if i else row
        for i, row in enumerate(PLAN.splitlines())
    )
    patterns = {"server": re.compile("^gpu-"), "leaf": re.compile("^leaf-"), "spine": re.compile("^spine-"),
                "superspine": re.compile("^ssp-")}  # fmt: skip
    fabric, _ = import_csv(flipped, patterns=patterns)
    assert fabric.peer(Endpoint("gpu-a01-n01", "mlx5_0")) == Endpoint("leaf-a01", "Ethernet1/1")
    assert design_report(fabric).clean


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a_node,a_port,b_node,b_port,colour\nx,1,y,2,red\n", r"line 1: unknown column 'colour'"),
        ("a_node,a_port,b_node\nx,1,y\n", r"line 1: no column 'b_port'"),
        (PLAN + "gpu-a01-n03,mlx5_0,leaf-a01,Ethernet1/1,400\n", r"row 9 \(line 10\): port leaf-a01 Ethernet1/1 is used twice \(first by row 1 \(line 2\)\)"),  # noqa: E501
        (PLAN + "leaf-a01,Ethernet9/1,leaf-a01,Ethernet10/1,400\n", r"row 9 \(line 10\): a cable from leaf-a01 to itself"),  # noqa: E501
        (PLAN + "gpu-a01-n03,mlx5_0,leaf-a01,Ethernet2/1,fast\n", r"row 9 \(line 10\): speed_gbps 'fast' is not a number"),  # noqa: E501
        (PLAN + "gpu-a01-n03,,leaf-a01,Ethernet2/1,400\n", r"row 9 \(line 10\): a_port is empty"),
        (PLAN + "gpu-a01-n03,mlx5_0,leaf-a01,Ethernet2/1,400,extra\n", r"row 9 \(line 10\): 6 values for 5 columns"),
        (PLAN + "gpu-a01-n03,mlx5_0,leaf-a01,Eth 2/1,400\n", r"row 9 \(line 10\): b_port 'Eth 2/1' has ' '"),
    ],
)  # fmt: skip
def test_each_bad_row_is_one_error_naming_the_row(text: str, message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        import_csv(text, source="plan.csv")


def test_every_bad_row_is_reported_at_once() -> None:
    text = PLAN + "a,1,a,2,400\nb,,c,1,400\nd,1,e,1,slow\n"
    with pytest.raises(TopologyError, match="3 bad row") as err:
        import_csv(text)
    assert [line.split(":")[0].strip() for line in str(err.value).splitlines()[1:]] == [
        "row 9 (line 10)", "row 10 (line 11)", "row 11 (line 12)",
    ]  # fmt: skip


def test_the_cli_writes_a_v2_inventory_that_loads(tmp_path: Path) -> None:
    generated = build_aipod(FabricParams(gpus=128, radix=16, rails=4), "mixed")
    rows = ["a_node,a_port,b_node,b_port,speed_gbps"] + [
        f"{ln.a.node},{ln.a.port},{ln.b.node},{ln.b.port},{ln.speed_gbps}" for ln in generated.links
    ]
    src, out = tmp_path / "plan.csv", tmp_path / "inv.yaml"
    src.write_text("\ufeff" + "\n".join(rows) + "\n")  # spreadsheets write a byte-order mark
    run = subprocess.run(
        [sys.executable, "-m", "cli.main", "inventory", "import", "csv", str(src), "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    fabric = load_inventory(out)
    assert {(ln.a, ln.b) for ln in fabric.links} == {(ln.a, ln.b) for ln in generated.links}
    for name, sw in generated.switches.items():
        assert (fabric.switches[name].role, fabric.switches[name].rail) == (sw.role, sw.rail)
    groups = {s.name: s.group for s in generated.servers.values()}
    assert {s.name: s.group for s in fabric.servers.values()} == groups


def test_the_cli_refuses_a_bad_sheet_in_one_line_per_row(tmp_path: Path) -> None:
    src = tmp_path / "plan.csv"
    src.write_text(PLAN + "a,1,a,2,400\n")
    run = subprocess.run(
        [sys.executable, "-m", "cli.main", "inventory", "import", "csv", str(src)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "row 9 (line 10): a cable from a to itself" in run.stderr

"""Slurm's host lists, the node map, Slurm's JSON (22.05 and 23.02+ shapes), the schedulers config."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from schedulers.config import SlurmConfig
from schedulers.discovery import to_jobs
from schedulers.executor import retry_delay_s
from schedulers.hostlist import HostlistError, compress, expand
from schedulers.node_map import NodeMapError, node_map
from schedulers.slurm import SlurmJob, SlurmRefused, SlurmUnavailable, is_outage, parse_jobs, parse_nodes, render

# --- host lists ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("srv-g1-[001-004]", ["srv-g1-001", "srv-g1-002", "srv-g1-003", "srv-g1-004"]),
        ("n[08-10],login1", ["n08", "n09", "n10", "login1"]),
        ("r[1-2]n[1,3]", ["r1n1", "r1n3", "r2n1", "r2n3"]),
        ("a,a,b", ["a", "b"]),
        ("gpu[7]", ["gpu7"]),
        ("", []),
        ("(null)", []),
    ],
)
def test_expand(text: str, names: list[str]) -> None:
    assert expand(text) == names


@pytest.mark.parametrize("bad", ["n[1-", "n1-3]", "n[[1]]", "n[a-b]", "n[3-1]", "n[1-2],,m", "n[]"])
def test_expand_refuses_what_is_not_slurm_syntax(bad: str) -> None:
    with pytest.raises(HostlistError):
        expand(bad)


def test_expand_refuses_a_list_larger_than_its_limit() -> None:
    with pytest.raises(HostlistError, match="more than 10"):
        expand("n[1-11]", limit=10)
    with pytest.raises(HostlistError, match="more than"):
        expand("a[1-1000]b[1-1000]c[1-1000]")  # a billion names, refused before making them


names = st.lists(
    st.builds(
        lambda prefix, n, width: f"{prefix}{n:0{width}d}",
        st.sampled_from(["srv-g1-", "srv-g2-", "gpu", "n"]),
        st.integers(0, 300),
        st.integers(1, 4),
    ),
    max_size=40,
)


@given(names)
def test_compress_then_expand_gives_the_same_names(ns: list[str]) -> None:
    assert set(expand(compress(ns))) == set(ns)


# --- node map ------------------------------------------------------------------------------------


def test_the_node_map_forms() -> None:
    ident = node_map(None)
    assert ident.identity and ident.server("srv-g1-001") == "srv-g1-001" and ident.node("x") == "x"
    table = node_map({"gpu001": "srv-g1-001"})
    assert table.server("gpu001") == "srv-g1-001" and table.node("srv-g1-001") == "gpu001"
    assert table.server("login1") is None and table.node("srv-g1-002") is None
    pat = node_map({"slurm": "gpu-{group}-{n}", "fabric": "srv-g{group}-{n}"})
    assert pat.server("gpu-2-017") == "srv-g2-017" and pat.node("srv-g2-017") == "gpu-2-017"
    assert pat.server("login1") is None and pat.node("other") is None


@given(st.integers(1, 99), st.integers(1, 999))
def test_a_pattern_map_works_both_ways(group: int, n: int) -> None:
    pat = node_map({"slurm": "node{g}x{n}", "fabric": "srv-g{g}-{n}"})
    server = f"srv-g{group}-{n:03d}"
    node = pat.node(server)
    assert node is not None and pat.server(node) == server


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ({"slurm": "gpu{n}", "fabric": "srv{m}"}, "must match"),
        ({"slurm": "gpu{n}{n}", "fabric": "srv{n}"}, "twice"),
        ({"a": "srv-1", "b": "srv-1"}, "both map"),
        ({"slurm": "gpu{n", "fabric": "srv-{n}"}, "names no"),
        ({"slurm": "gpu{n}}", "fabric": "srv-{n}"}, "brace"),
    ],
)
def test_a_node_map_that_cannot_work_both_ways_is_refused(spec: dict[str, str], error: str) -> None:
    with pytest.raises(NodeMapError, match=error):
        node_map(spec)
    with pytest.raises(ValidationError, match=error):
        SlurmConfig(node_map=spec)


# --- Slurm's JSON --------------------------------------------------------------------------------

SQUEUE_2205 = {
    "meta": {"plugin": {"type": "openapi/v0.0.38"}},
    "errors": [],
    "jobs": [
        {"job_id": 7, "name": "train", "job_state": "RUNNING", "nodes": "srv-g1-[001-002]",
         "start_time": 1796148787, "time_limit": 60},
        {"job_id": 8, "name": "queued", "job_state": "PENDING", "nodes": "", "start_time": 0, "time_limit": 60},
    ],
}  # fmt: skip
SQUEUE_2302 = {
    "errors": [],
    "jobs": [
        {"job_id": 9, "name": "llm", "job_state": ["RUNNING"], "nodes": "gpu[1-3]",
         "start_time": {"set": True, "infinite": False, "number": 1796148787},
         "time_limit": {"set": True, "infinite": True, "number": 0}},
        {"job_id": 10, "job_state": ["COMPLETING"], "nodes": "gpu4"},
    ],
}  # fmt: skip


def test_squeue_json_of_both_eras() -> None:
    (a,) = parse_jobs(SQUEUE_2205)
    assert a == SlurmJob("7", "train", ("srv-g1-001", "srv-g1-002"), datetime.fromtimestamp(1796148787, UTC), 60.0)
    (b,) = parse_jobs(SQUEUE_2302)
    assert b.job_id == "9" and b.nodes == ("gpu1", "gpu2", "gpu3") and b.time_limit_min is None
    assert b.started_at == datetime.fromtimestamp(1796148787, UTC)


def test_an_answer_with_errors_is_an_outage_not_an_empty_cluster() -> None:
    """What 22.05's squeue --json prints, with exit status 0, while slurmctld is away."""
    away = {"errors": [{"description": "Failed while looking for jobs", "error_number": -1}], "jobs": []}
    with pytest.raises(SlurmUnavailable, match="Failed while looking for jobs"):
        parse_jobs(away)
    with pytest.raises(SlurmUnavailable):
        parse_nodes({"errors": [{"error": "Unspecified error", "errno": -1}], "nodes": []})
    with pytest.raises(SlurmRefused):
        parse_jobs(["not", "an", "object"])


def test_a_job_with_a_bad_node_list_is_skipped_not_fatal() -> None:
    doc = {"jobs": [{"job_id": 1, "job_state": "RUNNING", "nodes": "n[1-"}, {"job_id": 2, "job_state": "RUNNING",
                                                                             "nodes": "n1"}]}  # fmt: skip
    assert [j.job_id for j in parse_jobs(doc)] == ["2"]


def test_sinfo_json_of_both_eras() -> None:
    old = parse_nodes({"nodes": [
        {"name": "a", "state": "allocated", "state_flags": ["DRAIN"], "reason": "fabricmon: 3 x"},
        {"name": "b", "state": "idle", "state_flags": [], "reason": ""},
    ]})  # fmt: skip
    assert old["a"].drained and old["a"].reason == "fabricmon: 3 x" and not old["b"].drained
    new = parse_nodes(
        {"nodes": [{"name": "c", "state": ["IDLE", "DRAIN"], "reason": "admin"}, {"name": "d", "state": ["MIXED"]}]}
    )
    assert new["c"].drained and not new["d"].drained and new["d"].reason == ""


@pytest.mark.parametrize(
    ("text", "outage"),
    [
        ("slurm_update error: Unable to contact slurm controller (connect failure)", True),
        ("squeue: error: Socket timed out on send/recv operation", True),
        ("slurm_update error: Invalid node name specified", False),
        ("scancel: error: Kill job error on job id 12: Invalid job id specified", False),
        ("Access/permission denied", False),
        ("slurm_update error: Protocol authentication error", True),  # munged is down
        ("squeue: error: slurm_receive_msg: Controller is in standby mode", True),
    ],
)
def test_outage_or_refusal(text: str, outage: bool) -> None:
    assert is_outage(text) is outage


def test_commands_are_rendered_as_a_person_would_type_them() -> None:
    argv = ["scontrol", "update", "NodeName=srv-g1-[001-002]", "State=DRAIN", "Reason=fabricmon: 12 lf-g1-r1:swp2"]
    assert (
        render(argv) == 'scontrol update "NodeName=srv-g1-[001-002]" State=DRAIN Reason="fabricmon: 12 lf-g1-r1:swp2"'
    )


# --- discovery and the executor's pure parts ----------------------------------------------------


def test_running_jobs_become_fabricmon_jobs_on_fabric_servers_only() -> None:
    jobs = [
        SlurmJob("7", "train", ("gpu1", "gpu2", "login1"), None, 2880.0),
        SlurmJob("8", "cpu-only", ("login1",), None, None),
        SlurmJob("9", "forever", ("gpu3",), None, None),
    ]
    mapping = node_map({"slurm": "gpu{n}", "fabric": "srv-g1-00{n}"})
    out, skipped = to_jobs(jobs, mapping, {"srv-g1-001", "srv-g1-002", "srv-g1-003"})
    assert [(j.id, j.hosts, j.expected_days) for j in out] == [
        ("slurm:7", ("srv-g1-001", "srv-g1-002"), 2.0),
        ("slurm:9", ("srv-g1-003",), None),
    ]
    assert skipped == 1


@given(st.integers(1, 40), st.floats(1, 3600))
def test_retry_delays_grow_and_stay_bounded(attempts: int, max_s: float) -> None:
    d = retry_delay_s(attempts, max_s)
    assert 0.8 * min(max_s, 2.0 ** (attempts - 1)) <= d <= 1.2 * min(max_s, 2.0 ** (attempts - 1))


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"checkpoint_signal": "SIGNOPE"}, "unknown signal"),
        ({"poll_s": 0}, "poll_s"),
        ({"rest": {"url": "not a url"}}, "url"),
        ({"drian": True}, "drian"),
    ],
)
def test_bad_slurm_config_is_a_clear_error(data: dict[str, Any], error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        SlurmConfig.model_validate(data)


def test_signals_are_normalised() -> None:
    assert SlurmConfig(checkpoint_signal="sigusr1").checkpoint_signal == "USR1"
    assert SlurmConfig(checkpoint_signal="USR2").checkpoint_signal == "USR2"


def test_a_node_list_that_is_missing_or_empty_is_never_an_empty_cluster() -> None:
    """Slurm 23.11+'s sinfo --json groups nodes under "sinfo": read as "nothing known", every host
    would be "not a Slurm node" and no drain would ever run."""
    docs: list[dict[str, Any]] = [{"sinfo": [{"nodes": {"nodes": ["n1"]}}]}, {"nodes": []}, {"errors": []}]
    for doc in docs:
        with pytest.raises(SlurmRefused, match="node list"):
            parse_nodes(doc)


def test_out_of_service_states() -> None:
    down = parse_nodes({"nodes": [{"name": "a", "state": "down", "state_flags": ["DRAIN"], "reason": "x"}]})["a"]
    failed = parse_nodes({"nodes": [{"name": "b", "state": ["IDLE", "FAIL"]}]})["b"]
    idle = parse_nodes({"nodes": [{"name": "c", "state": ["IDLE"]}]})["c"]
    assert down.out_of_service and failed.out_of_service and not idle.out_of_service

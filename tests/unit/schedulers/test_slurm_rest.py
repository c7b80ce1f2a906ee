"""slurmrestd's pure parts: requests per API version, what each version can do, the answers' meaning
(bodies recorded from Debian's slurmrestd 22.05.8), tokens, the ``rest`` config and the client choice."""

from __future__ import annotations

import json
import time
from typing import Any, cast

import pytest
from pydantic import ValidationError
from yarl import URL

from schedulers.config import SchedulersConfig, SlurmConfig
from schedulers.service import Schedulers
from schedulers.slurm import Operation, SlurmCommands, SlurmRefused, SlurmUnavailable, parse_jobs, parse_nodes
from schedulers.slurm_rest import (
    Request,
    SlurmRest,
    check_answer,
    client_for,
    op_requests,
    slurm_errors,
    token_problem,
    unsupported,
)
from store.db import Pool
from tests.support.slurmrestd import forged_token

REASON = "fabricmon: 12 lf-g1-r1:swp3 link_flapping"
TOKEN = forged_token({"exp": int(time.time()) + 30 * 86400, "iat": int(time.time()), "sun": "root"})


def rest_config(version: str = "v0.0.39", **kw: Any) -> SlurmConfig:
    rest = {"url": "http://slurmctl:6820", "token": TOKEN, "api_version": version}
    return SlurmConfig.model_validate({"rest": rest, **kw})


# --- requests --------------------------------------------------------------------------------------


def test_a_drain_is_one_post_per_node_and_reads_like_the_audit_shows_it() -> None:
    client = SlurmRest(rest_config("v0.0.39"))
    assert client.describe(Operation("drain", ("srv-g1-003",), REASON)) == (
        f'POST /slurm/v0.0.39/node/srv-g1-003 {{"state": ["DRAIN"], "reason": "{REASON}"}}'
    )
    two = client.describe(Operation("drain", ("srv-g1-003", "srv-g1-004"), REASON))
    assert two.count("POST /slurm/v0.0.39/node/") == 2 and "; POST /slurm/v0.0.39/node/srv-g1-004 " in two
    assert (
        client.describe(Operation("resume", ("srv-g1-003",)))
        == 'POST /slurm/v0.0.39/node/srv-g1-003 {"state": ["RESUME"]}'
    )


def test_a_checkpoint_signal_goes_to_the_batch_step_only() -> None:
    (req,) = op_requests(Operation("signal", job_id="4711", signal="USR1"), "v0.0.41")
    assert str(req) == "DELETE /slurm/v0.0.41/job/4711?signal=USR1&flags=BATCH_JOB"
    assert req.body is None


@pytest.mark.parametrize(
    ("kind", "version", "needs"),
    [
        ("drain", "v0.0.38", "Slurm 23.02"),
        ("resume", "v0.0.38", "Slurm 23.02"),
        ("signal", "v0.0.38", "Slurm 23.11"),
        ("signal", "v0.0.39", "Slurm 23.11"),
        ("drain", "v0.0.39", None),
        ("signal", "v0.0.40", None),
        ("drain", "v0.0.44", None),
        ("jobs", "v0.0.38", None),
        ("nodes", "v0.0.38", None),
    ],
)
def test_what_each_api_version_can_do(kind: str, version: str, needs: str | None) -> None:
    why = unsupported(kind, version)
    if needs is None:
        assert why is None
    else:
        assert why is not None and needs in why and version in why and "scontrol" in why


def test_an_operation_the_version_cannot_do_is_refused_before_any_request() -> None:
    client = SlurmRest(rest_config("v0.0.38"))
    op = Operation("drain", ("srv-g1-003",), REASON)
    with pytest.raises(SlurmRefused, match=r"v0\.0\.39 \(Slurm 23\.02\)"):
        op_requests(op, "v0.0.38")
    assert client.describe(op).startswith("not sent: drain through slurmrestd needs")


def test_urls_keep_the_base_path_and_encode_each_segment() -> None:
    req = Request("POST", ("slurm", "v0.0.39", "node", "gpu[1] a/b"))
    assert str(req.url(URL("https://proxy.example/slurm-api/"))) == (
        "https://proxy.example/slurm-api/slurm/v0.0.39/node/gpu%5B1%5D%20a%2Fb"
    )
    assert (
        str(Request("GET", ("slurm", "v0.0.38", "jobs")).url(URL("http://h:6820/")))
        == "http://h:6820/slurm/v0.0.38/jobs"
    )


# --- answers -------------------------------------------------------------------------------------

META = {"plugin": {"type": "openapi/v0.0.38", "name": "Slurm OpenAPI v0.0.38"}, "Slurm": {"release": "22.05.8"}}


def body(errors: list[dict[str, Any]], **more: Any) -> bytes:
    return json.dumps({"meta": META, "errors": errors, **more}).encode()


#: What 22.05.8 answers (HTTP 500) while slurmctld is away, and also when slurmctld rejected the token.
UNSPECIFIED_NODES = body([{"error": "Unspecified error", "errno": -1}], nodes=[])
UNSPECIFIED_JOBS = body(
    [{"description": "Failed while looking for jobs", "error_number": -1, "error": "Unspecified error",
      "source": "slurm_load_jobs"}], jobs=[],
)  # fmt: skip
CONTROLLER_AWAY = body(
    [{"description": "unable to kill JobId=1 with signal 10: Unable to contact slurm controller (connect failure)",
      "error_number": 1800, "error": "Unable to contact slurm controller (connect failure)",
      "source": "slurm_kill_job"}],
)  # fmt: skip
UNKNOWN_JOB = body(
    [{"description": "unable to kill JobId=999 with signal 10: Invalid job id specified", "error_number": 2017,
      "error": "Invalid job id specified", "source": "slurm_kill_job"}],
)  # fmt: skip
UNKNOWN_NODE = body([{"error": "Invalid node name specified", "errno": 2018}], nodes=[])
BAD_SIGNAL = body(
    [{"description": "invalid signal: 0", "error_number": 9000, "error": "Query empty or not RFC7320 compliant",
      "source": "HTTP request: signal"}],
)  # fmt: skip
AUTH_ERROR = body([{"description": "auth", "error_number": 6000, "error": "Invalid authentication credential"}])


@pytest.mark.parametrize(
    ("status", "answer", "error", "text"),
    [
        (500, UNSPECIFIED_NODES, SlurmUnavailable, "slurmctld is unreachable, or it rejected the token"),
        (500, UNSPECIFIED_JOBS, SlurmUnavailable, "Failed while looking for jobs"),
        (500, CONTROLLER_AWAY, SlurmUnavailable, "cannot reach slurmctld"),
        (500, UNKNOWN_JOB, SlurmRefused, "Invalid job id specified"),
        (500, UNKNOWN_NODE, SlurmRefused, "Invalid node name specified"),
        (400, BAD_SIGNAL, SlurmRefused, "invalid signal"),
        (500, AUTH_ERROR, SlurmRefused, "rejected the token"),
        (401, b"Authentication failure", SlurmRefused, "no valid token"),
        (403, b"", SlurmRefused, "no valid token"),
        (404, b"Unable find requested URL. Please view /openapi/v3 for API reference.", SlurmRefused, "api_version"),
        (405, b"Requested REST method is not defined at URL.", SlurmRefused, "HTTP 405"),
        (502, b"<html>Bad Gateway</html>", SlurmUnavailable, "HTTP 502"),
        (503, b"", SlurmUnavailable, "HTTP 503"),
        (200, b"not json", SlurmRefused, "without a JSON object"),
    ],
)
def test_answers_are_outages_or_refusals(status: int, answer: bytes, error: type[Exception], text: str) -> None:
    with pytest.raises(error, match=text):
        check_answer(status, answer, "GET /slurm/v0.0.38/nodes")


def test_a_good_answer_is_read_with_the_command_parsers() -> None:
    job = {"job_id": 1, "name": "train", "job_state": "RUNNING", "nodes": "srv-g1-[001-002]",
           "start_time": 1796149730, "time_limit": 90}  # fmt: skip
    doc = check_answer(200, body([], jobs=[job]), "GET /slurm/v0.0.38/jobs")
    (j,) = parse_jobs(doc)
    assert (j.job_id, j.nodes, j.time_limit_min) == ("1", ("srv-g1-001", "srv-g1-002"), 90.0)
    node = {"name": "srv-g1-001", "state": "allocated", "state_flags": [], "reason": ""}
    assert parse_nodes(check_answer(200, body([], nodes=[node]), "GET"))["srv-g1-001"].state == {"ALLOCATED"}


def test_slurm_errors_read_both_numbering_keys() -> None:
    assert slurm_errors(json.loads(UNKNOWN_NODE)) == [(2018, "Invalid node name specified")]
    assert slurm_errors(json.loads(UNKNOWN_JOB))[0][0] == 2017
    assert slurm_errors({"errors": ["odd"]}) == [(None, "odd")]
    assert slurm_errors([]) == []


# --- tokens and config ----------------------------------------------------------------------------


def test_tokens_fabricmon_can_judge_itself() -> None:
    now = time.time()
    assert token_problem(TOKEN, now) is None
    assert token_problem(forged_token({"sun": "root"}), now) is None  # no exp: does not expire
    assert "not a JWT" in (token_problem("abc", now) or "")
    assert "not a JWT" in (token_problem("a.!!!.c", now) or "")
    assert "expired at" in (token_problem(forged_token({"exp": int(now) - 5}), now) or "")


async def test_a_bad_token_is_refused_without_a_request_and_never_shown() -> None:
    expired = forged_token({"exp": int(time.time()) - 60, "sun": "root"})
    client = SlurmRest(_with_token(expired))
    with pytest.raises(SlurmRefused, match="token expired at") as err:
        await client.jobs()
    assert expired not in str(err.value) and expired not in repr(client)


def _with_token(token: str) -> SlurmConfig:
    return SlurmConfig.model_validate({"rest": {"url": "http://127.0.0.1:9", "token": token}})


def test_scontrol_token_output_pasted_verbatim_works() -> None:
    client = SlurmRest(_with_token(f"SLURM_JWT={TOKEN}\n"))
    assert client._token() == TOKEN


@pytest.mark.parametrize(
    ("rest", "error"),
    [
        ({"url": "http://h:6820"}, "token"),
        ({"url": "http://h:6820", "token": "  "}, "empty token"),
        ({"url": "http://h:6820", "token": TOKEN, "api_version": "v0.0.37"}, "v0.0.38"),
        ({"url": "http://h:6820", "token": TOKEN, "api_version": "0.0.39"}, "api_version"),
    ],
)
def test_bad_rest_config_is_a_clear_error(rest: dict[str, Any], error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        SlurmConfig.model_validate({"rest": rest})


def test_the_token_does_not_show_in_the_config() -> None:
    config = rest_config()
    assert TOKEN not in repr(config) and TOKEN not in str(config.model_dump())


def test_rest_when_configured_else_the_commands_and_one_client_for_both_tasks() -> None:
    assert isinstance(client_for(rest_config()), SlurmRest)
    assert isinstance(client_for(SlurmConfig()), SlurmCommands)
    for slurm in (rest_config(), SlurmConfig()):
        s = Schedulers(SchedulersConfig(slurm=slurm), ["srv-g1-001"], cast(Pool, None))
        assert s.executor is not None and s.discovery is not None
        assert s.executor.slurm is s.discovery.slurm
        assert isinstance(s.executor.slurm, SlurmRest if slurm.rest else SlurmCommands)


def test_configured_actions_the_version_cannot_do_are_warned_about_at_start(caplog: pytest.LogCaptureFixture) -> None:
    SlurmRest(rest_config("v0.0.38", checkpoint_signal="USR1"))
    warned = [r.getMessage() for r in caplog.records]
    assert any("every drain action will be refused" in w and "Slurm 23.02" in w for w in warned), warned
    assert any("every signal action will be refused" in w and "Slurm 23.11" in w for w in warned), warned
    caplog.clear()
    SlurmRest(rest_config("v0.0.40", checkpoint_signal="USR1"))
    assert not caplog.records

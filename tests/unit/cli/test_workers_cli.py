"""``fabricmon collect --workers``: what the command line accepts, refuses, and how it meets the config."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cli.commands.collect import CollectError, _worker_count
from cli.context import config_of
from cli.main import build_parser, main
from collector.workers import auto_workers


@pytest.fixture(autouse=True)
def _no_config_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FABRICMON_CONFIG", raising=False)
    monkeypatch.delenv("FABRICMON_COLLECTOR__WORKERS", raising=False)
    monkeypatch.delenv("FABRICMON_COLLECTOR__SHARD", raising=False)


def _config(tmp_path: Path, collector: dict[str, object]) -> str:
    path = tmp_path / "fabricmon.yaml"
    path.write_text(yaml.safe_dump({"collector": collector}))
    return str(path)


def _count(*argv: str) -> int | None:
    args = build_parser().parse_args(["collect", *argv])
    return _worker_count(args, config_of(args))


@pytest.mark.parametrize("value", ["0", "65", "-2", "many"])
def test_a_bad_count_is_one_line_and_exit_2(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["collect", "--workers", value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "argument --workers: must be 1 to 64 or 'auto', got" in err


def test_workers_with_shard_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["collect", "--workers", "2", "--shard", "0/2"]) == 2
    assert capsys.readouterr().err == "fabricmon collect: error: --workers runs every shard itself: drop --shard\n"


def test_workers_with_a_configured_shard_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CollectError, match=r"drop collector\.shard"):
        _count("--config", _config(tmp_path, {"shard": "1/2"}), "--workers", "2")


def test_the_count_comes_from_the_flag_else_the_config(tmp_path: Path) -> None:
    assert _count() is None  # one process, as before
    assert _count("--workers", "1") == 1  # allowed: shard 0/1 under a supervisor
    assert _count("--workers", "auto") == auto_workers()
    config = _config(tmp_path, {"workers": 3})
    assert _count("--config", config) == 3
    assert _count("--config", config, "--workers", "2") == 2
    assert _count("--config", config, "--shard", "0/3") is None  # how each worker is started
    assert _count("--config", _config(tmp_path, {"workers": "auto"})) == auto_workers()


def test_help_names_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["collect", "--help"])
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert "--workers N|auto" in out and "usable cores minus one" in out

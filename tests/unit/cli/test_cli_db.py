"""``fabricmon db``: output shapes and exit codes, on the test run's cluster or an empty data dir.

``FABRICMON_DATA_DIR`` (set by conftest for the whole run) makes the command's default store
the test cluster, so nothing here touches the user's own store.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cli.main import main
from store.pgserver import EmbeddedStore
from store.pgsystem import find_bindir


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["db", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.db
def test_url_prints_the_dsn_alone(pg_store: EmbeddedStore, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "url")
    assert code == 0 and out == pg_store.dsn() + "\n"
    psql = find_bindir() / "psql"
    done = subprocess.run(
        [str(psql), out.strip(), "-X", "-Atc", "SELECT 1"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.stdout.strip() == "1", done.stderr


@pytest.mark.db
def test_start_is_idempotent_and_says_where(pg_store: EmbeddedStore, capsys: pytest.CaptureFixture[str]) -> None:
    status = pg_store.status()
    code, out, _ = _run(capsys, "start")
    assert code == 0
    assert out.strip() == f"embedded store running on 127.0.0.1:{status.port} (data: {status.data_dir})"
    assert pg_store.status().pid == status.pid


@pytest.mark.db
@pytest.mark.parametrize("argv", [("status", "--json"), ("--json", "status")])
def test_status_json(pg_store: EmbeddedStore, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]) -> None:
    code, out, _ = _run(capsys, *argv)
    data = json.loads(out)
    assert code == 0 and data["running"] is True and data["port"] == pg_store.status().port
    assert data["dsn"].startswith("postgresql://fabricmon:***@127.0.0.1:")  # never the password


def test_empty_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FABRICMON_DATA_DIR", str(tmp_path))
    code, out, _ = _run(capsys, "status")
    assert code == 0 and "not created yet" in out
    code, out, _ = _run(capsys, "--json", "status")
    assert code == 0 and json.loads(out)["running"] is False
    code, out, _ = _run(capsys, "stop")
    assert code == 0 and "was not running" in out
    code, out, err = _run(capsys, "url")
    assert code == 2 and out == "" and err.count("\n") == 1 and "fabricmon db start" in err
    assert not (tmp_path / "pg").exists()

"""Configuration: defaults, overrides, and one clear error per problem."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cli.main import main
from collector.config import CollectorConfig
from config.errors import ConfigError
from config.loader import load_config
from config.model import Config


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "fabricmon.yaml"
    path.write_text(text)
    return path


GOOD = """
database:
  dsn: postgresql://fm:${FM_DB_PASSWORD}@db.example:5432/fabricmon
fabric:
  generate: {gpus: 1024}
targets:
  - switches: ["lf-*"]
    protocol: gnmi
    address: "127.0.0.1:9339"
  - switches: ["sp-*", "ssp-*"]
    protocol: snmp
    address: "{mgmt_address}:161"
    community: "{switch}"
collector:
  gnmi_interval_s: 10
alerts:
  webhooks:
    - url: http://127.0.0.1:9000/hook
      secret: ${FM_HOOK_SECRET}
api:
  listen: 0.0.0.0:8080
  tokens: [t0ken]
"""


def test_defaults_without_a_file() -> None:
    config = load_config(None, env={})
    assert config == Config()
    assert config.database.dsn is None
    assert config.collector.snmp_interval_s == 60
    assert config.analyzer.thresholds.fatal_outage_s == 7


def test_full_file_with_env_refs(tmp_path: Path) -> None:
    env = {"FM_DB_PASSWORD": "s3cret", "FM_HOOK_SECRET": "hmac-key"}
    config = load_config(write(tmp_path, GOOD), env=env)
    assert config.database.dsn is not None
    assert config.database.dsn.get_secret_value() == "postgresql://fm:s3cret@db.example:5432/fabricmon"
    assert config.fabric.generate is not None and config.fabric.generate.gpus == 1024
    assert [t.protocol for t in config.targets] == ["gnmi", "snmp"]
    assert config.alerts.webhooks[0].secret is not None
    assert config.alerts.webhooks[0].secret.get_secret_value() == "hmac-key"
    # Secrets never show in reprs (and so never in logs).
    assert "s3cret" not in repr(config) and "hmac-key" not in repr(config) and "t0ken" not in repr(config)


def test_env_overrides_win(tmp_path: Path) -> None:
    env = {
        "FM_DB_PASSWORD": "x",
        "FM_HOOK_SECRET": "y",
        "FABRICMON_COLLECTOR__GNMI_INTERVAL_S": "2.5",
        "FABRICMON_API__LISTEN": "127.0.0.1:9999",
        "FABRICMON_DATA_DIR": "/not/a/config/key",
    }
    config = load_config(write(tmp_path, GOOD), env=env)
    assert config.collector.gnmi_interval_s == 2.5
    assert config.api.listen == "127.0.0.1:9999"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("database:\n  dsm: x\n", "fabricmon.yaml:2: database.dsm: unknown key (did you mean 'dsn'?)"),
        (
            "targets:\n  - switches: [a]\n    address: '1.2.3.4:1'\n",
            "fabricmon.yaml:2: targets[0].protocol: missing required key",
        ),
        (
            "collector:\n  gnmi_interval_s: fast\n",
            "fabricmon.yaml:2: collector.gnmi_interval_s: Input should be a valid number",
        ),
        ("api:\n  listen: nowhere\n", "fabricmon.yaml:2: api.listen: Value error, expected host:port"),
        ("database: [1, 2\n", "fabricmon.yaml:2: invalid YAML"),
        ("- a\n- b\n", "fabricmon.yaml:1: the top level must be a mapping"),
        ("api:\n  listen: a:1\napi:\n  listen: b:2\n", "fabricmon.yaml:3: api: duplicate key"),
        (
            "database:\n  dsn: ${NOT_SET_ANYWHERE}\n",
            "fabricmon.yaml:2: database.dsn: environment variable ${NOT_SET_ANYWHERE} is not set",
        ),
        (
            "collector:\n  gnmi_interval_s: 10\n  queue_rows: 50000\n",
            "fabricmon.yaml:3: collector.queue_rows: removed key (it was never read; the writer's buffer is"
            " database.writer.max_pending_rows): delete it",
        ),
        (
            "collector:\n  stale_intervals: 3\n",
            "fabricmon.yaml:2: collector.stale_intervals: removed key (it was never read; the stale_switch alarm"
            " uses analyzer.thresholds.stale_intervals): delete it",
        ),
    ],
)
def test_errors_name_key_and_line(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text), env={})
    message = str(info.value)
    assert "\n" not in message
    assert expected in message


def test_env_override_error_names_the_variable() -> None:
    with pytest.raises(
        ConfigError, match=r"environment FABRICMON_COLLECTOR__SNMP_INTERVAL_S: collector.snmp_interval_s"
    ):
        load_config(None, env={"FABRICMON_COLLECTOR__SNMP_INTERVAL_S": "-3"})


def test_removed_keys_are_gone_and_their_replacements_load(tmp_path: Path) -> None:
    removed = {"queue_rows", "stale_intervals"}
    assert set(CollectorConfig.removed_keys) == removed
    assert not removed & set(CollectorConfig.model_fields)
    with pytest.raises(ConfigError) as info:
        load_config(None, env={"FABRICMON_COLLECTOR__QUEUE_ROWS": "50000"})
    assert str(info.value).startswith("environment FABRICMON_COLLECTOR__QUEUE_ROWS: collector.queue_rows: removed key")
    text = "analyzer:\n  thresholds:\n    stale_intervals: 5\ndatabase:\n  writer:\n    max_pending_rows: 1000\n"
    config = load_config(write(tmp_path, text), env={})
    assert config.analyzer.thresholds.stale_intervals == 5 and config.database.writer.max_pending_rows == 1000


def test_missing_file() -> None:
    with pytest.raises(ConfigError, match="no such config file"):
        load_config("/nonexistent/fabricmon.yaml", env={})


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("database:\n  dsm: x\n", "database.dsm: unknown key"),
        ("targets:\n  - switches: [a]\n    address: '1.2.3.4:1'\n", "targets[0].protocol: missing required key"),
        ("collector:\n  gnmi_interval_s: fast\n", "collector.gnmi_interval_s"),
        ("collector:\n  queue_rows: 50000\n", "collector.queue_rows: removed key"),
    ],
)
def test_cli_reports_one_line_and_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, needle: str
) -> None:
    code = main(["migrate", "--config", str(write(tmp_path, text))])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("fabricmon migrate: error: ")
    assert needle in err


def test_cli_process_has_no_traceback(tmp_path: Path) -> None:
    path = write(tmp_path, "database:\n  dsn: 5\n  dsm: x\n")
    proc = subprocess.run(
        [sys.executable, "-m", "cli.main", "migrate", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert "database.dsn" in proc.stderr or "database.dsm" in proc.stderr


def test_the_defaults_document_is_current() -> None:
    from config.defaults import render

    doc = Path(__file__).resolve().parents[3] / "docs" / "config-defaults.yaml"
    assert doc.read_text() == render(), "run: python -m config.defaults > docs/config-defaults.yaml"

"""The docker-compose deployment, checked without a Docker engine.

- ``docker-compose config`` (Debian's docker-compose) accepts docker-compose.yml, demo profile
  included; secrets come from env files only.
- Every service that runs fabricmon runs a real ``fabricmon`` command line, and the config the
  services mount (deploy/fabricmon.yaml) loads with the environment compose gives them.
- The TimescaleDB scripts run through psql here: Grafana's read-only role is created, and the
  rollups (continuous aggregates) are skipped harmlessly on the Apache-only build.
- Every SQL query of the Grafana dashboard, its time macros and template variable expanded as
  Grafana's PostgreSQL data source expands them, runs as Grafana's role against the real schema
  and returns rows on a simulated fabric with a downed uplink and a PFC storm.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
import yaml

from analyzer.service import AnalyzerService
from cli.context import fabric_of
from cli.main import build_parser
from collector.pipeline import Pipeline
from collector.runner import plan
from config.loader import load_config
from config.model import Config
from fabric.model import FabricParams
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState
from simulator.feed import feed
from store.db import create_pool
from store.inventory import ensure_fabric
from store.migrate import migrate

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
DEPLOY = REPO / "deploy"
SECRETS = DEPLOY / "secrets"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "fabricmon.json"
DATASOURCES = DEPLOY / "grafana" / "provisioning" / "datasources" / "fabricmon.yaml"
DASHBOARD_PROVIDERS = DEPLOY / "grafana" / "provisioning" / "dashboards" / "fabricmon.yaml"
READER_SQL = DEPLOY / "timescaledb" / "010_grafana_reader.sql"
ROLLUPS_SQL = DEPLOY / "timescaledb" / "rollups.sql"

SERVICES = {"timescaledb", "migrate", "rollups", "collector", "analyzer", "api", "grafana", "simulator"}
#: What each long-running or one-shot fabricmon service must run.
FABRICMON_COMMANDS = {
    "migrate": "migrate",
    "collector": "collect",
    "analyzer": "analyze",
    "api": "api",
    "simulator": "sim",
}
SECRET_NAME = re.compile(r"PASSWORD|SECRET|TOKEN|COMMUNITY|KEY", re.IGNORECASE)


# -- the compose file, as written and as docker-compose resolves it ----------------------------------


def raw_compose() -> dict[str, Any]:
    """docker-compose.yml as YAML (anchors and merge keys resolved, ``${VAR:-default}`` not)."""
    data = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


_DEFAULTED = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}")


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's own ``${VAR}`` / ``${VAR:-default}`` / ``$$`` interpolation, for the raw file."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if isinstance(value, str):
        out = _DEFAULTED.sub(lambda m: env.get(m.group(1)) or (m.group(2) or ""), value.replace("$$", "\0"))
        return out.replace("\0", "$")
    return value


def read_env_file(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines of an env file (comments and blank lines skipped)."""
    env: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, sep, value = line.partition("=")
            assert sep, f"{path}: not KEY=VALUE: {line!r}"
            env[key.strip()] = value
    return env


@pytest.fixture(scope="module")
def secrets_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example env files, copied the way deploy/README.md tells an operator to."""
    target = tmp_path_factory.mktemp("secrets")
    for example in sorted(SECRETS.glob("*.env.example")):
        shutil.copy(example, target / example.name.removesuffix(".example"))
    return target


def service_env(service: dict[str, Any]) -> dict[str, str]:
    """The environment a container of ``service`` starts with: its env files, then ``environment``."""
    env: dict[str, str] = {}
    files = service.get("env_file", [])
    for name in [files] if isinstance(files, str) else files:
        env.update(read_env_file(Path(name)))
    env.update({k: str(v) for k, v in (service.get("environment") or {}).items()})
    return env


def resolved_raw(secrets: Path) -> dict[str, Any]:
    """The raw file with compose's defaults applied and its env files taken from ``secrets``."""
    data = interpolate(raw_compose(), {"FABRICMON_SECRETS_DIR": str(secrets)})
    assert isinstance(data, dict)
    return data


def test_docker_compose_config_accepts_the_file(secrets_dir: Path) -> None:
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.skip("docker-compose is not installed (`make setup` installs Debian's docker-compose)")
    # The file's own defaults only: nothing from the caller's shell that compose would interpolate.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FABRICMON_", "COMPOSE_", "GRAFANA_"))}
    env.update(FABRICMON_SECRETS_DIR=str(secrets_dir), COMPOSE_PROFILES="demo")
    done = subprocess.run(
        [binary, "-f", str(COMPOSE_FILE), "--profile", "demo", "config"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    config = yaml.safe_load(done.stdout)
    services = config["services"]
    assert set(services) == SERVICES
    assert services["simulator"]["profiles"] == ["demo"]

    db = services["timescaledb"]
    assert re.fullmatch(r"timescale/timescaledb:\d+\.\d+\.\d+-pg15", db["image"]), "pin the pg15 image"
    assert "pg_isready" in " ".join(db["healthcheck"]["test"])
    assert "/healthz" in " ".join(services["api"]["healthcheck"]["test"])
    assert any(p["target"] == 8080 for p in services["api"]["ports"])

    wanted = {
        "migrate": {"timescaledb": "service_healthy"},
        "rollups": {"migrate": "service_completed_successfully"},
        "collector": {"timescaledb": "service_healthy", "migrate": "service_completed_successfully"},
        "analyzer": {"timescaledb": "service_healthy", "migrate": "service_completed_successfully"},
        "api": {"timescaledb": "service_healthy", "migrate": "service_completed_successfully"},
        "grafana": {"timescaledb": "service_healthy"},
    }
    for name, deps in wanted.items():
        assert {k: v["condition"] for k, v in services[name]["depends_on"].items()} == deps, name
    # The env files' values reached the containers: secrets travel through env files.
    assert (
        services["api"]["environment"]["POSTGRES_PASSWORD"]
        == read_env_file(secrets_dir / "db.env")["POSTGRES_PASSWORD"]
    )
    # Every file a service mounts from the repository exists.
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0] if isinstance(volume, str) else volume.get("source", "")
            if source.startswith("/"):
                assert Path(source).exists(), f"{name} mounts {source}, which does not exist"


def test_secrets_come_from_env_files_only() -> None:
    compose = raw_compose()
    for name, service in compose["services"].items():
        inline = [k for k in (service.get("environment") or {}) if SECRET_NAME.search(k)]
        assert not inline, f"{name}: secrets inline in docker-compose.yml: {inline}"
        for env_file in (
            [service["env_file"]] if isinstance(service.get("env_file"), str) else service.get("env_file", [])
        ):
            assert env_file.startswith("${FABRICMON_SECRETS_DIR:-./deploy/secrets}/"), env_file
            example = SECRETS / (env_file.rsplit("/", 1)[1] + ".example")
            assert example.is_file(), f"{name}: no template {example} for {env_file}"
    assert "*.env" in (SECRETS / ".gitignore").read_text(encoding="utf-8").split()
    ignored = (REPO / ".dockerignore").read_text(encoding="utf-8").split()
    assert "deploy" in ignored and "**/*.env" in ignored  # no secret can enter the image


def fabricmon_services(compose: dict[str, Any]) -> dict[str, list[str]]:
    """Each service whose command runs fabricmon, with its command line."""
    return {
        name: [str(a) for a in s["command"]]
        for name, s in compose["services"].items()
        if isinstance(s.get("command"), list) and s["command"][0] == "fabricmon"
    }


def test_each_fabricmon_service_runs_a_real_command(secrets_dir: Path) -> None:
    compose = resolved_raw(secrets_dir)
    commands = fabricmon_services(compose)
    assert {name: argv[1] for name, argv in commands.items()} == FABRICMON_COMMANDS
    parser = build_parser()
    for name, argv in commands.items():
        try:
            args = parser.parse_args(argv[1:])
        except SystemExit as exc:  # argparse's way of saying "no such command or option"
            raise AssertionError(f"{name}: `{' '.join(argv)}` is not a valid fabricmon command line") from exc
        assert args.command == argv[1]
        assert callable(args.handler)
    assert commands["migrate"][1:] == ["migrate", "--load-fabric"]
    # The one image: every fabricmon service is built from the Dockerfile here.
    for name in commands:
        assert compose["services"][name]["build"] == ".", name
        assert compose["services"][name]["image"] == compose["services"]["migrate"]["image"]


def test_the_mounted_config_loads_with_the_services_environment(secrets_dir: Path) -> None:
    compose = resolved_raw(secrets_dir)
    services = compose["services"]
    config_path = DEPLOY / "fabricmon.yaml"
    for name in ("migrate", "collector", "analyzer", "api"):
        service = services[name]
        assert "./deploy/fabricmon.yaml:/etc/fabricmon/fabricmon.yaml:ro" in service["volumes"]
        env = service_env(service)
        assert env["FABRICMON_CONFIG"] == "/etc/fabricmon/fabricmon.yaml"
        config = load_config(config_path, env=env)
        assert config.database.dsn is not None
        dsn = urlsplit(config.database.dsn.get_secret_value())
        assert (dsn.hostname, dsn.port, dsn.path) == ("timescaledb", 5432, "/fabricmon")
        assert dsn.password == env["POSTGRES_PASSWORD"]
        assert [t.get_secret_value() for t in config.api.tokens] == [env["FABRICMON_API_TOKEN"]]
    # The fabric is the simulator's, and every one of its switches is collected from it.
    sim = services["simulator"]["command"]
    config = load_config(config_path, env=service_env(services["collector"]))
    fabric = fabric_of(config)
    assert fabric.gpus == int(sim[sim.index("--gpus") + 1])
    the_plan = plan(config, fabric)
    assert the_plan.unmatched == [] and the_plan.switches == len(fabric.switches)
    sim_ports = {sim[sim.index(flag) + 1].rsplit(":", 1)[1] for flag in ("--gnmi", "--snmp")}
    assert {t.address.rsplit(":", 1)[1] for t in config.targets} == sim_ports
    assert {t.address.rsplit(":", 1)[0] for t in config.targets} == {"simulator"}
    # The API listens where compose publishes it and probes it.
    api = services["api"]
    port = config.api.listen.rsplit(":", 1)[1]
    assert any(str(p).endswith(f":{port}") for p in api["ports"])
    assert f"127.0.0.1:{port}/healthz" in " ".join(api["healthcheck"]["test"])
    collector = " ".join(services["collector"]["command"])
    assert "--metrics-listen 0.0.0.0:9108" in collector
    assert "127.0.0.1:9108/metrics" in " ".join(services["collector"]["healthcheck"]["test"])


def test_grafana_is_provisioned_with_the_dashboard(secrets_dir: Path) -> None:
    compose = resolved_raw(secrets_dir)
    grafana = compose["services"]["grafana"]
    mounts = {v.split(":")[1]: v.split(":")[0] for v in grafana["volumes"]}
    assert mounts["/etc/grafana/provisioning"] == "./deploy/grafana/provisioning"
    (datasource,) = yaml.safe_load(DATASOURCES.read_text(encoding="utf-8"))["datasources"]
    (provider,) = yaml.safe_load(DASHBOARD_PROVIDERS.read_text(encoding="utf-8"))["providers"]
    assert mounts[provider["options"]["path"]] == "./deploy/grafana/dashboards"
    assert grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"] == (
        provider["options"]["path"] + "/" + DASHBOARD.name
    )
    # Grafana logs in as the read-only role the database creates, with the password both read.
    env = service_env(grafana)
    db_env = service_env(compose["services"]["timescaledb"])
    assert datasource["user"] == "$GRAFANA_DB_USER" and env["GRAFANA_DB_USER"] == db_env["GRAFANA_DB_USER"]
    assert datasource["secureJsonData"]["password"] == "$GRAFANA_DB_PASSWORD"
    assert env["GRAFANA_DB_PASSWORD"] == db_env["GRAFANA_DB_PASSWORD"]
    assert datasource["url"] == "timescaledb:5432" and datasource["jsonData"]["database"] == "fabricmon"
    assert datasource["jsonData"]["timescaledb"] is True
    # Every query of the dashboard goes to that data source.
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    for query in dashboard_queries(dashboard):
        assert query.datasource_uid == datasource["uid"], query.where


# -- Grafana's PostgreSQL data source, as far as the dashboard uses it ------------------------------


@dataclass(frozen=True)
class Query:
    where: str
    sql: str
    format: str
    datasource_uid: str | None


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def dashboard_queries(dashboard: dict[str, Any]) -> list[Query]:
    """Every SQL query of the dashboard: panel targets, annotations and template variables."""
    out: list[Query] = []
    for panel in _panels(dashboard["panels"]):
        panel_ds = (panel.get("datasource") or {}).get("uid")
        for t in panel.get("targets", []):
            uid = (t.get("datasource") or {}).get("uid", panel_ds)
            out.append(
                Query(f"panel {panel['title']!r} {t['refId']}", t["rawSql"], t.get("format", "time_series"), uid)
            )
    for a in dashboard.get("annotations", {}).get("list", []):
        if "target" in a:
            out.append(Query(f"annotation {a['name']!r}", a["target"]["rawSql"], "table", a["datasource"]["uid"]))
    for v in dashboard.get("templating", {}).get("list", []):
        if v["type"] == "query":
            out.append(Query(f"variable {v['name']!r}", v["query"], "table", v["datasource"]["uid"]))
    return out


_MACRO = re.compile(r"\$([_a-zA-Z0-9]+)\(([^\)]*)\)")  # Grafana's own pattern (pkg/tsdb/grafana-postgresql-datasource)
_DURATION = re.compile(r"^(\d+)(ms|s|m|h|d)$")


def _seconds(interval: str) -> float:
    match = _DURATION.match(interval.strip().strip("'"))
    assert match, f"interval {interval!r}"
    return int(match.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]


def _rfc3339(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def expand(sql: str, start: datetime, end: datetime, interval: str, variables: dict[str, list[str]]) -> str:
    """What Grafana sends to PostgreSQL for ``sql`` (data source option ``timescaledb: true``).

    Template variables first (multi-value: quoted literals, comma-separated), then the global
    ``$__interval_ms`` / ``$__interval``, then the data source's macros.
    """
    for name, values in variables.items():
        quoted = ",".join("'" + v.replace("'", "''") + "'" for v in values)
        sql = sql.replace(f"${{{name}:csv}}", ",".join(values)).replace(f"${{{name}}}", quoted)
        sql = re.sub(rf"\${name}\b", quoted.replace("\\", "\\\\"), sql)
    sql = sql.replace("$__interval_ms", str(int(_seconds(interval) * 1000))).replace("$__interval", interval)

    def macro(match: re.Match[str]) -> str:
        name, args = match.group(1), [a.strip() for a in match.group(2).split(",")]
        # Grafana's compatibility rule: $__timeGroup directly followed by ',' means ...Alias.
        after = sql[match.end() : match.end() + 1]
        if name == "__timeGroup" and after == ",":
            name = "__timeGroupAlias"
        if name == "__timeFilter":
            return f"{args[0]} BETWEEN '{_rfc3339(start)}' AND '{_rfc3339(end)}'"
        if name == "__timeFrom":
            return f"'{_rfc3339(start)}'"
        if name == "__timeTo":
            return f"'{_rfc3339(end)}'"
        if name in ("__timeGroup", "__timeGroupAlias"):
            assert len(args) in (2, 3), f"{name} needs a column and an interval"
            bucket = f"time_bucket('{_seconds(args[1]):.3f}s',{args[0]})"
            return bucket + (' AS "time"' if name == "__timeGroupAlias" else "")
        raise AssertionError(f"macro ${name} is not one the test knows how Grafana expands")

    sql = _MACRO.sub(macro, sql)
    leftover = re.search(r"\$(\w+|\{)", sql)
    assert leftover is None, f"unexpanded variable or macro {leftover.group(0)!r} in:\n{sql}"
    return sql


def test_expand_matches_grafana() -> None:
    t0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    got = expand(
        "SELECT $__timeGroup(time, $__interval), x FROM t WHERE $__timeFilter(time) AND r IN ($rail) "
        "AND $__timeTo() > $__timeFrom() LIMIT $__interval_ms",
        t0,
        t0 + timedelta(minutes=5),
        "1m",
        {"rail": ["0", "1"]},
    )
    assert got == (
        "SELECT time_bucket('60.000s',time) AS \"time\", x FROM t WHERE time BETWEEN "
        "'2026-11-01T12:00:00.000000Z' AND '2026-11-01T12:05:00.000000Z' AND r IN ('0','1') "
        "AND '2026-11-01T12:05:00.000000Z' > '2026-11-01T12:00:00.000000Z' LIMIT 60000"
    )


# -- the database side: psql scripts and the dashboard's queries on a simulated fabric --------------

S = 1_000_000_000
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
FABRIC = build_aipod(FabricParams(gpus=512))


def psql_binary() -> str | None:
    return shutil.which("psql") or next(
        (str(p) for p in sorted(Path("/usr/lib/postgresql").glob("*/bin/psql"), reverse=True)), None
    )


def run_psql(dsn: str, script: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``script`` through psql, as the timescaledb image's entrypoint runs it; GRAFANA_DB_* only from ``env``."""
    binary = psql_binary()
    if binary is None:
        pytest.skip("psql is not installed (`make setup` installs postgresql-15, which brings it)")
    base = {k: v for k, v in os.environ.items() if not k.startswith("GRAFANA_DB_")}
    return subprocess.run(
        [binary, "--no-psqlrc", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-f", str(script)],
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def with_user(dsn: str, user: str, password: str) -> str:
    parts = urlsplit(dsn)
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{user}:{password}@{host}"))


@pytest.fixture
def grafana_dsn(fresh_db: str) -> Iterator[str]:
    """A DSN for Grafana's role, created by the same script the timescaledb service runs."""
    role, password = f"grafana_test_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    done = run_psql(fresh_db, READER_SQL, {"GRAFANA_DB_USER": role, "GRAFANA_DB_PASSWORD": password})
    assert done.returncode == 0, done.stderr
    try:
        yield with_user(fresh_db, role, password)
    finally:
        subprocess.run(
            [str(psql_binary()), "--no-psqlrc", "-d", fresh_db, "-c", f'DROP ROLE IF EXISTS "{role}"'],
            capture_output=True,
            timeout=60,
            check=False,
        )


def test_the_reader_script_refuses_to_run_without_a_password(fresh_db: str) -> None:
    done = run_psql(fresh_db, READER_SQL, {"GRAFANA_DB_USER": f"grafana_test_{uuid.uuid4().hex[:8]}"})
    assert done.returncode != 0 and "GRAFANA_DB_PASSWORD is not set" in done.stderr


async def test_rollups_are_harmless_on_the_apache_build(fresh_db: str) -> None:
    conn = await asyncpg.connect(fresh_db)
    try:
        await migrate(conn)
        license_ = await conn.fetchval("SELECT current_setting('timescaledb.license', true)")
        done = run_psql(fresh_db, ROLLUPS_SQL)
        assert done.returncode == 0, done.stderr
        if license_ != "timescale":
            assert "nothing changed" in done.stdout
            views = await conn.fetchval("SELECT count(*) FROM timescaledb_information.continuous_aggregates")
            assert views == 0
        # Each aggregate's query is valid on the schema the migrations create: run it as a plain query.
        bodies = re.findall(
            r"CREATE MATERIALIZED VIEW IF NOT EXISTS (\w+)\s+WITH \(timescaledb\.continuous[^)]*\) AS\s+"
            r"(.*?)\s+WITH NO DATA;",
            ROLLUPS_SQL.read_text(encoding="utf-8"),
            re.DOTALL,
        )
        assert {name for name, _ in bodies} == {
            "port_counters_1h",
            "pfc_counters_1h",
            "link_events_1d",
            "oversubscription_1h",
        }
        for _, body in bodies:
            await conn.fetch(f"SELECT * FROM ({body}) AS q LIMIT 1")
    finally:
        await conn.close()


async def simulate(dsn: str) -> datetime:
    """A 512-GPU fabric through the collectors' pipeline and two analyzer rounds; the last instant.

    One clean minute, then an uplink of lf-g1-r3 goes down (flap, drift, rail asymmetry) and
    lf-g1-r1 starts a PFC storm; the analyzer evaluates before and after, storing the
    oversubscription series, its verdicts and the alerts.
    """
    pool = await create_pool(dsn)
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
            await ensure_fabric(conn, FABRIC)
        clock = [int(T0.timestamp()) * S]
        state = FabricState(FABRIC, seed=7, clock=lambda: clock[0])
        analyzer = AnalyzerService(Config(), FABRIC, pool)
        pipe = Pipeline(pool, FABRIC)
        pipe.start()
        try:

            async def steps(n: int) -> datetime:
                for _ in range(n):
                    clock[0] += 10 * S
                    state.tick(clock[0])
                    await feed(state, pipe, clock[0])
                for writer in pipe.writers:
                    await writer.flush()
                return datetime.fromtimestamp(clock[0] / S, tz=UTC)

            await analyzer.evaluate_once(await steps(4))
            state.apply({"kind": "link_down", "switch": "lf-g1-r3"})
            state.apply({"kind": "pfc_storm", "switch": "lf-g1-r1", "priority": 3, "rate_pps": 5000})
            now = await steps(4)
            report = await analyzer.evaluate_once(now)
        finally:
            await pipe.close()
        assert report["status"] != "healthy"
        return now
    finally:
        await pool.close()


async def test_every_dashboard_query_returns_rows_on_a_simulated_fabric(fresh_db: str, grafana_dsn: str) -> None:
    now = await simulate(fresh_db)
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    queries = dashboard_queries(dashboard)
    start, end = T0 - timedelta(minutes=5), now + timedelta(seconds=1)
    conn = await asyncpg.connect(grafana_dsn)  # Grafana's read-only role
    try:
        assert await conn.fetchval("SHOW default_transaction_read_only") == "on"
        variables: dict[str, list[str]] = {}
        for v in dashboard["templating"]["list"]:
            rows = await conn.fetch(expand(v["query"], start, end, "10s", {}))
            assert rows, f"variable {v['name']!r} has no values"
            variables[v["name"]] = [str(r["__value"]) for r in rows]
        assert variables["rail"] == [str(r) for r in range(1, 9)]
        for interval in ("10s", "1m"):
            for q in queries:
                sql = expand(q.sql, start, end, interval, variables)
                try:
                    rows = await conn.fetch(sql)
                except asyncpg.PostgresError as exc:
                    raise AssertionError(f"{q.where} fails: {exc}\n{sql}") from exc
                assert rows, f"{q.where} returns no rows ({interval}):\n{sql}"
                if q.format == "time_series":
                    check_time_series(q, rows)
    finally:
        await conn.close()


def check_time_series(q: Query, rows: list[asyncpg.Record]) -> None:
    """What Grafana needs of a time-series result: a sorted ``time`` column and numeric values."""
    columns = list(rows[0].keys())
    assert "time" in columns, f"{q.where}: no 'time' column in {columns}"
    times = [r["time"] for r in rows]
    assert times == sorted(times), f"{q.where}: rows are not sorted by time"
    values = [c for c in columns if c not in ("time", "metric")]
    assert values, f"{q.where}: no value column"
    for c in values:
        present = [r[c] for r in rows if r[c] is not None]
        assert present, f"{q.where}: column {c!r} is always NULL"
        assert all(isinstance(v, int | float) for v in present), f"{q.where}: column {c!r} is not numeric"

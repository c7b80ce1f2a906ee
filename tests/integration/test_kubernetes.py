"""The Kubernetes deployment (deploy/kubernetes), checked without a cluster.

- ``kubectl kustomize`` renders the base, both overlays (``small``, ``16k``) and the small overlay
  with the trial TimescaleDB component; every document validates offline against the Kubernetes
  1.32 schemas (``kubernetes-validate``, strict: no unknown field), except the Prometheus
  Operator's ServiceMonitor and PrometheusRule, whose CRDs are not in them: those are checked
  structurally, and the rule groups with ``promtool check rules``.
- Every reference resolves inside the render (ConfigMaps, Secrets, volumes, Services, selectors).
- Every container of the fabricmon image runs a real ``fabricmon`` command line (parsed by the
  CLI's own parser, after Kubernetes' ``$(VAR)`` expansion), and the configuration it mounts loads
  with the environment its pod gets (settings, secrets, downward API).
- The collectors' static shards: pod i of N replicas runs ``--shard i/N``, N equals the replica
  count, and the shards partition the fabric; with ``components/shard-auto`` (the ``16k-failover``
  overlay) every pod runs ``--shard auto`` with more pods than ``collector.shards``, whose shards
  partition the fabric. The overlays follow the sizing rule (docs/operations/sizing.md).
- Probes hit the ports the commands listen on; the NetworkPolicies let through what the
  configuration needs; the PrometheusRule holds exactly deploy/prometheus/fabricmon-rules.yml.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from cli.context import fabric_of
from cli.main import build_parser
from collector.runner import plan
from collector.targets import parse_shard
from config.loader import load_config
from config.model import Config
from fabric.model import Fabric, FabricParams
from fabric.topology import build_aipod

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "kubernetes"
RULES = REPO / "deploy" / "prometheus" / "fabricmon-rules.yml"
SYNC_RULES = K8S / "components" / "prometheus-operator" / "sync_prometheus_rules.py"
KUBERNETES = "1.32"
NAMESPACE = "fabricmon"

#: What the tests render: name → the kustomization directory, components added on top, and whether
#: the secrets come from a ``secrets.env`` made from secrets.env.example (as deploy/README.md says).
RENDERS: dict[str, tuple[str, tuple[str, ...], bool]] = {
    "base": ("base", (), False),
    "small": ("overlays/small", (), False),
    "16k": ("overlays/16k", (), False),
    "small+trial": ("overlays/small", ("components/timescaledb-trial",), False),
    "16k+secrets.env": ("overlays/16k", (), True),
    "16k-failover": ("overlays/16k-failover", (), False),
}
SECRETS_EXAMPLE = K8S / "secrets.env.example"
#: What the tests put in place of each REPLACE-ME of secrets.env.example (URL-safe, like a real one).
FILLED_IN = "9f3c1e7a5b2d4c6e8f0a1b3c"
OVERLAYS = ("small", "16k")
#: Each fabricmon workload (its component label) and the fabricmon command it must run.
COMMANDS = {"collector": "collect", "analyzer": "analyze", "api": "api", "migrate": "migrate"}
WORKLOADS = {"Deployment", "StatefulSet", "Job", "DaemonSet", "ReplicaSet"}
#: Prometheus Operator kinds: no schema in kubernetes-validate, checked structurally here.
OPERATOR_KINDS = {"ServiceMonitor", "PrometheusRule"}
POD_INDEX = "metadata.labels['apps.kubernetes.io/pod-index']"
SECRET_NAME = re.compile(r"PASSWORD|SECRET|TOKEN|COMMUNITY|DSN|KEY", re.IGNORECASE)

# The sizing rule (docs/operations/sizing.md, docs/benchmarks.md): values/s = ports x 32 / gNMI interval;
# one collect process per ~130K values/s ("~": the sizing page's own 16K example is 262,144 / 2 =
# 131,072 per shard), at ~200K values per CPU-second; 444 MB RSS per process at that load.
VALUES_PER_PORT = 32
VALUES_PER_PROCESS = 130_000 * 1.05
VALUES_PER_CPU_S = 200_000
RSS_PER_SHARD = 444 * 10**6
MEASURED_VALUES_PER_SHARD = 131_072
#: Tables the collector spools (collector/pipeline.py), each up to database.writer.spool_max_mb.
SPOOL_TABLES = 4
#: One analyzer evaluation at 16K GPUs takes up to ~1 s of one core (docs/benchmarks.md).
ANALYZER_EVALUATION_S = 1.0

KUBECTL_HINT = (
    "kubectl with kustomize >= 5 is not installed: install `kubectl` from Kubernetes' apt repository "
    "(pkgs.k8s.io) or its release binary; Debian 12's `kubernetes-client` (1.20, kustomize 2) is too old"
)

Doc = dict[str, Any]


# -- rendering -------------------------------------------------------------------------------------


def _kubectl() -> str:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip(KUBECTL_HINT)
    done = subprocess.run(
        [kubectl, "version", "--client", "-o", "json"], capture_output=True, text=True, timeout=60, check=False
    )
    version = json.loads(done.stdout or "{}").get("kustomizeVersion", "") if done.returncode == 0 else ""
    match = re.match(r"v?(\d+)\.", version)
    if match is None or int(match.group(1)) < 5:
        pytest.skip(f"{KUBECTL_HINT} (this kubectl's kustomize: {version or 'unknown'})")
    return kubectl


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Doc]]:
    """``kubectl kustomize`` of every entry of :data:`RENDERS`, as parsed documents."""
    kubectl = _kubectl()
    out: dict[str, list[Doc]] = {}
    for name, (directory, components, secrets_env) in RENDERS.items():
        root = K8S / directory
        if components or secrets_env:  # the overlay as a user changes theirs
            root = overlay_copy(root, components, secrets_env, tmp_path_factory.mktemp("overlay"))
        done = subprocess.run(
            [kubectl, "kustomize", str(root)], capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, f"kubectl kustomize {directory} {components}: {done.stderr}"
        out[name] = [d for d in yaml.safe_load_all(done.stdout) if d]
    return out


def overlay_copy(overlay: Path, components: tuple[str, ...], secrets_env: bool, target: Path) -> Path:
    """A copy of ``overlay`` in ``target``, its paths into the tree kept, with ``components`` added
    and, with ``secrets_env``, its Secret from a ``secrets.env`` (secrets.env.example's own steps)."""
    rel = os.path.relpath(K8S, target)  # kustomize refuses absolute paths
    for path in overlay.iterdir():
        shutil.copy(path, target / path.name)
    kustomization = yaml.safe_load((overlay / "kustomization.yaml").read_text(encoding="utf-8"))
    for field in ("resources", "components"):
        kustomization[field] = [e.replace("../..", rel, 1) for e in kustomization.get(field, [])]
    kustomization["components"] += [f"{rel}/{c}" for c in components]
    if secrets_env:
        (target / "secrets.env").write_text(filled_in_secrets(), encoding="utf-8")
        generator = {"name": "fabricmon-secrets", "behavior": "replace", "envs": ["secrets.env"]}
        kustomization.setdefault("secretGenerator", []).append(generator)
    (target / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False), encoding="utf-8")
    return target


def filled_in_secrets() -> str:
    """secrets.env.example with its placeholders replaced, as an operator makes secrets.env."""
    return SECRETS_EXAMPLE.read_text(encoding="utf-8").replace("REPLACE-ME", FILLED_IN)


def read_env_file(text: str) -> dict[str, str]:
    """``KEY=VALUE`` lines (comments and blank lines skipped), as kustomize's ``envs`` reads them."""
    lines = (line.strip() for line in text.splitlines())
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def find(docs: list[Doc], kind: str, name: str | None = None) -> list[Doc]:
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def one(docs: list[Doc], kind: str, name: str) -> Doc:
    found = find(docs, kind, name)
    assert len(found) == 1, f"{kind}/{name}: {len(found)} in the render"
    return found[0]


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def pod_spec(doc: Doc) -> Doc:
    spec: Doc = doc["spec"]["template"]["spec"]
    return spec


def containers(doc: Doc) -> list[Doc]:
    spec = pod_spec(doc)
    return [*spec.get("initContainers", []), *spec["containers"]]


def fabricmon_image(name: str) -> str:
    """The fabricmon image of a render: the kustomization's ``images:`` entry for ``fabricmon``."""
    directory = RENDERS[name][0]
    kustomization = yaml.safe_load((K8S / directory / "kustomization.yaml").read_text(encoding="utf-8"))
    (entry,) = [i for i in kustomization["images"] if i["name"] == "fabricmon"]
    return f"{entry['newName']}:{entry['newTag']}"


@dataclass(frozen=True)
class Workload:
    """One fabricmon container of one pod (collector pod i of N: one each)."""

    component: str
    doc: Doc
    container: Doc
    pod_index: int | None

    @property
    def where(self) -> str:
        index = "" if self.pod_index is None else f"-{self.pod_index}"
        return f"{self.doc['kind']}/{self.doc['metadata']['name']}{index}"


def fabricmon_workloads(docs: list[Doc], image: str) -> Iterator[Workload]:
    for doc in docs:
        if doc["kind"] not in WORKLOADS:
            continue
        component = doc["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]
        indices: list[int | None] = list(range(doc["spec"]["replicas"])) if doc["kind"] == "StatefulSet" else [None]
        for container in containers(doc):
            if container["image"] == image:
                for i in indices:
                    yield Workload(component, doc, container, i)


# -- what a container gets: Kubernetes' environment and $(VAR) expansion ---------------------------

_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion: defined variables replaced, ``$$`` escapes, others kept."""

    def sub(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env.get(name, match.group(0))

    return _REF.sub(sub, value)


def _secret_data(secret: Doc) -> dict[str, str]:
    data = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
    data.update(secret.get("stringData") or {})
    return data


def container_env(w: Workload, docs: list[Doc]) -> dict[str, str]:
    """The environment the kubelet gives ``w``: ``envFrom`` first, then ``env`` in order."""
    env: dict[str, str] = {}
    for source in w.container.get("envFrom", []):
        if "configMapRef" in source:
            env.update(one(docs, "ConfigMap", source["configMapRef"]["name"])["data"])
        else:
            env.update(_secret_data(one(docs, "Secret", source["secretRef"]["name"])))
    fields = {"metadata.namespace": NAMESPACE, "metadata.name": w.where.rsplit("/", 1)[1]}
    if w.pod_index is not None:
        fields[POD_INDEX] = str(w.pod_index)
    for var in w.container.get("env", []):
        if "value" in var:
            env[var["name"]] = expand(var["value"], env)
            continue
        ref = var["valueFrom"]
        if "secretKeyRef" in ref:
            env[var["name"]] = _secret_data(one(docs, "Secret", ref["secretKeyRef"]["name"]))[
                ref["secretKeyRef"]["key"]
            ]
        elif "configMapKeyRef" in ref:
            env[var["name"]] = one(docs, "ConfigMap", ref["configMapKeyRef"]["name"])["data"][
                ref["configMapKeyRef"]["key"]
            ]
        else:
            path = ref["fieldRef"]["fieldPath"]
            assert path in fields, f"{w.where}: env {var['name']} from {path}, which this pod does not have"
            env[var["name"]] = fields[path]
    return env


def argv_of(w: Workload, docs: list[Doc]) -> list[str]:
    env = container_env(w, docs)
    argv = [expand(a, env) for a in [*w.container.get("command", []), *w.container.get("args", [])]]
    unexpanded = [a for a in argv if "$(" in a]
    assert not unexpanded, f"{w.where}: undefined variables in {unexpanded}"
    return argv


def parse(w: Workload, docs: list[Doc]) -> Any:
    """The container's command line, parsed by fabricmon's own parser (nothing is run)."""
    argv = argv_of(w, docs)
    assert argv[0] == "fabricmon", f"{w.where}: runs {argv[0]!r}, not fabricmon"
    try:
        return build_parser().parse_args(argv[1:])
    except SystemExit as exc:  # argparse's way of saying "no such command or option"
        raise AssertionError(f"{w.where}: `{' '.join(argv)}` is not a valid fabricmon command line") from exc


def mounted_file(w: Workload, docs: list[Doc], path: str) -> str:
    """The content of ``path`` in the container: a key of a ConfigMap mounted as a directory."""
    volumes = {v["name"]: v for v in pod_spec(w.doc).get("volumes", [])}
    for mount in w.container.get("volumeMounts", []):
        source = volumes.get(mount["name"], {}).get("configMap")
        directory, _, key = path.rpartition("/")
        if source is not None and "subPath" not in mount and mount["mountPath"].rstrip("/") == directory:
            data = one(docs, "ConfigMap", source["name"])["data"]
            assert key in data, f"{w.where}: {path}: no key {key!r} in ConfigMap/{source['name']}"
            return str(data[key])
    raise AssertionError(f"{w.where}: {path} is not in any mounted ConfigMap")


def config_of(w: Workload, docs: list[Doc], tmp: Path) -> tuple[Config, dict[str, str]]:
    """The configuration ``w`` loads (FABRICMON_CONFIG, with its pod's environment)."""
    env = container_env(w, docs)
    assert "FABRICMON_CONFIG" in env, f"{w.where}: no FABRICMON_CONFIG"
    path = tmp / "fabricmon.yaml"
    path.write_text(mounted_file(w, docs, env["FABRICMON_CONFIG"]), encoding="utf-8")
    return load_config(path, env=env), env


@cache
def _aipod(gpus: int, rails: int, radix: int, speed_gbps: int) -> Fabric:
    return build_aipod(FabricParams(gpus=gpus, rails=rails, radix=radix, speed_gbps=speed_gbps))


def fabric_for(config: Config) -> Fabric:
    """``fabric_of(config)``, each generated fabric built once for the whole module."""
    gen = config.fabric.generate
    return fabric_of(config) if gen is None else _aipod(gen.gpus, gen.rails, gen.radix, gen.speed_gbps)


def generated(docs: list[Doc], kind: str, name: str) -> Doc:
    """The object a kustomize generator made from ``name`` (its name carries a content hash)."""
    found = [
        d for d in find(docs, kind) if re.fullmatch(rf"{re.escape(name)}(-[a-z0-9]{{10}})?", d["metadata"]["name"])
    ]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} in the render"
    return found[0]


def config_refs(value: Any) -> set[str]:
    """The ``${VAR}`` references in the values of a parsed config file (comments excluded)."""
    if isinstance(value, dict):
        return set().union(*(config_refs(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(config_refs(v) for v in value))
    return set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", value)) if isinstance(value, str) else set()


def quantity(text: str | int | float) -> float:
    """A Kubernetes quantity (``250m``, ``1``, ``768Mi``, ``2G``) as a number."""
    match = re.fullmatch(r"([0-9.]+)(m|k|M|G|T|Ki|Mi|Gi|Ti)?", str(text))
    assert match, f"quantity {text!r}"
    scale = {None: 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
    scale.update({"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40})
    return float(match.group(1)) * scale[match.group(2)]


def container_port(container: Doc, port: int | str) -> int:
    if isinstance(port, int):
        return port
    (number,) = [p["containerPort"] for p in container.get("ports", []) if p.get("name") == port]
    assert isinstance(number, int)
    return number


# -- the render as a whole ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", RENDERS)
def test_every_document_validates_against_the_kubernetes_schemas(rendered: dict[str, list[Doc]], name: str) -> None:
    docs = rendered[name]
    kinds = {d["kind"] for d in docs}
    assert {"Namespace", "ConfigMap", "Secret", "StatefulSet", "Deployment", "Job", "Service"} <= kinds
    assert {"PodDisruptionBudget", "NetworkPolicy", "ServiceAccount"} <= kinds
    if name != "base":
        assert kinds >= OPERATOR_KINDS
    seen: set[tuple[str, str]] = set()
    for doc in docs:
        key = (doc["kind"], doc["metadata"]["name"])
        assert key not in seen, f"{key} twice"
        seen.add(key)
        if doc["kind"] != "Namespace":
            assert doc["metadata"].get("namespace") == NAMESPACE, key
        if doc["kind"] in OPERATOR_KINDS:
            assert doc["apiVersion"] == "monitoring.coreos.com/v1", key
            continue  # checked in test_prometheus_operator_objects
        try:
            kubernetes_validate.validate(doc, KUBERNETES, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            raise AssertionError(
                f"{name}: {key} does not validate against Kubernetes {KUBERNETES}: {path}: {exc.message}"
            ) from None
        except kubernetes_validate.SchemaNotFoundError as exc:
            raise AssertionError(f"{name}: {exc.message}") from None
    assert [d["metadata"]["name"] for d in find(docs, "Namespace")] == [NAMESPACE]


def test_the_validator_refuses_what_kubernetes_would() -> None:
    """The schema check bites: a misspelt field and a wrong type are errors, not warnings."""
    sts = yaml.safe_load((K8S / "base" / "collector.yaml").read_text(encoding="utf-8").split("---\n")[1])
    kubernetes_validate.validate(sts, KUBERNETES, strict=True)
    typo = json.loads(json.dumps(sts))
    typo["spec"]["replica"] = typo["spec"].pop("replicas")
    wrong = json.loads(json.dumps(sts))
    wrong["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "9108"
    for bad in (typo, wrong):
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(bad, KUBERNETES, strict=True)


def _references(w: Doc) -> Iterator[tuple[str, str, str]]:
    """(kind, name, what refers to it) for every object a workload's pods use."""
    spec = pod_spec(w)
    yield "ServiceAccount", spec["serviceAccountName"], "serviceAccountName"
    for volume in spec.get("volumes", []):
        if "configMap" in volume:
            yield "ConfigMap", volume["configMap"]["name"], f"volume {volume['name']}"
        if "secret" in volume:
            yield "Secret", volume["secret"]["secretName"], f"volume {volume['name']}"
    for container in containers(w):
        for source in container.get("envFrom", []):
            kind = "ConfigMap" if "configMapRef" in source else "Secret"
            yield kind, (source.get("configMapRef") or source["secretRef"])["name"], "envFrom"
        for var in container.get("env", []):
            for kind, field in (("Secret", "secretKeyRef"), ("ConfigMap", "configMapKeyRef")):
                if field in var.get("valueFrom", {}):
                    yield kind, var["valueFrom"][field]["name"], f"env {var['name']}"
    if w["kind"] == "StatefulSet":
        yield "Service", w["spec"]["serviceName"], "serviceName"


@pytest.mark.parametrize("name", RENDERS)
def test_every_reference_resolves_in_the_render(rendered: dict[str, list[Doc]], name: str) -> None:
    docs = rendered[name]
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    for w in (d for d in docs if d["kind"] in WORKLOADS):
        where = f"{w['kind']}/{w['metadata']['name']}"
        for kind, target, what in _references(w):
            assert (kind, target) in names, f"{where}: {what} refers to {kind}/{target}, not in the render"
        if "selector" in w["spec"]:  # a Job's is generated
            assert matches(w["spec"]["selector"]["matchLabels"], w["spec"]["template"]["metadata"]["labels"]), where
        volumes = {v["name"] for v in pod_spec(w).get("volumes", [])}
        volumes |= {c["metadata"]["name"] for c in w["spec"].get("volumeClaimTemplates", [])}
        for container in containers(w):
            for mount in container.get("volumeMounts", []):
                assert mount["name"] in volumes, f"{where}: mount {mount['name']}"
        if w["kind"] == "StatefulSet":
            service = one(docs, "Service", w["spec"]["serviceName"])
            assert service["spec"].get("clusterIP") == "None", f"{where}: its Service is not headless"


@pytest.mark.parametrize("name", RENDERS)
def test_selectors_select_one_workload_each(rendered: dict[str, list[Doc]], name: str) -> None:
    docs = rendered[name]
    workloads = [d for d in docs if d["kind"] in WORKLOADS]
    selectors: dict[str, Callable[[Doc], dict[str, str]]] = {
        "Service": lambda d: d["spec"]["selector"],
        "PodDisruptionBudget": lambda d: d["spec"]["selector"]["matchLabels"],
        "NetworkPolicy": lambda d: d["spec"]["podSelector"]["matchLabels"],
    }
    selected: dict[tuple[str, str], list[str]] = {}
    for kind, selector_of in selectors.items():
        for doc in find(docs, kind):
            pods = [w for w in workloads if matches(selector_of(doc), w["spec"]["template"]["metadata"]["labels"])]
            assert len(pods) == 1, f"{kind}/{doc['metadata']['name']} selects {len(pods)} workloads"
            selected.setdefault((pods[0]["kind"], pods[0]["metadata"]["name"]), []).append(kind)
    # Every pod has its NetworkPolicy; every long-running fabricmon workload its PodDisruptionBudget.
    for w in workloads:
        kinds = selected.get((w["kind"], w["metadata"]["name"]), [])
        assert "NetworkPolicy" in kinds, f"{w['metadata']['name']}: no NetworkPolicy"
        is_fabricmon = w["metadata"]["labels"]["app.kubernetes.io/name"] == "fabricmon"
        wanted = 1 if w["kind"] != "Job" and is_fabricmon else 0  # the trial database is one pod
        assert kinds.count("PodDisruptionBudget") == wanted, w["metadata"]["name"]


# -- the fabricmon containers --------------------------------------------------------------------------


@pytest.mark.parametrize("name", RENDERS)
def test_every_fabricmon_container_runs_a_real_fabricmon_command(rendered: dict[str, list[Doc]], name: str) -> None:
    docs = rendered[name]
    image = fabricmon_image(name)
    found = list(fabricmon_workloads(docs, image))
    assert {w.component for w in found} == set(COMMANDS)
    for w in found:
        args = parse(w, docs)
        assert args.command == COMMANDS[w.component], w.where
        assert callable(args.handler)
    # The analyzer is a pair (they elect a leader); the API a Deployment behind its Service.
    assert one(docs, "Deployment", "fabricmon-analyzer")["spec"]["replicas"] == 2
    assert one(docs, "Job", "fabricmon-migrate")["spec"]["template"]["spec"]["containers"][0]["args"][0] == "migrate"
    # Every other container is the trial's TimescaleDB, the image docker-compose.yml runs.
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text(encoding="utf-8"))
    others = [c for d in docs if d["kind"] in WORKLOADS for c in containers(d) if c["image"] != image]
    assert [c["image"] for c in others] == ([compose["services"]["timescaledb"]["image"]] if "trial" in name else [])


@pytest.mark.parametrize("name", RENDERS)
def test_the_collector_shards_are_the_stateful_sets_pods(
    rendered: dict[str, list[Doc]], name: str, tmp_path: Path
) -> None:
    docs = rendered[name]
    sts = one(docs, "StatefulSet", "fabricmon-collector")
    replicas = sts["spec"]["replicas"]
    collectors = [w for w in fabricmon_workloads(docs, fabricmon_image(name)) if w.component == "collector"]
    assert [w.pod_index for w in collectors] == list(range(replicas))
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    env = {v["name"]: v for v in container.get("env", [])}
    auto = "failover" in name
    if auto:
        assert not {"SHARD_INDEX", "SHARD_COUNT"} & set(env), "static-shard variables in a lease-claiming pod"
    else:
        assert env["SHARD_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"] == POD_INDEX
        assert env["SHARD_COUNT"]["value"] == str(replicas), "N in --shard I/N must be the replica count"
    for w in collectors:
        args = parse(w, docs)
        if auto:  # every pod claims leases of the configured shards; the rest stand by
            assert args.shard == "auto", w.where
        else:
            assert args.shard == f"{w.pod_index}/{replicas}", w.where
            assert parse_shard(args.shard) == (w.pod_index, replicas)
        assert args.metrics_listen == "0.0.0.0:9108"
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    if auto:
        config, _ = config_of(collectors[0], docs, tmp_path)
        assert config.collector.shards is not None, "--shard auto needs collector.shards"
        assert replicas > config.collector.shards, "no spare pod to take over a shard"


@pytest.mark.parametrize("name", RENDERS)
def test_the_config_loads_in_every_fabricmon_container(
    rendered: dict[str, list[Doc]], name: str, tmp_path: Path
) -> None:
    docs = rendered[name]
    secrets = _secret_data(generated(docs, "Secret", "fabricmon-secrets"))
    for w in fabricmon_workloads(docs, fabricmon_image(name)):
        config, env = config_of(w, docs, tmp_path)
        assert config.database.dsn is not None, w.where
        dsn = urlsplit(config.database.dsn.get_secret_value())
        if "trial" in name:  # the component's database, with the component's password
            trial = _secret_data(one(docs, "Secret", "fabricmon-timescaledb"))
            assert (dsn.hostname, dsn.port, dsn.path) == ("fabricmon-timescaledb", 5432, "/fabricmon"), w.where
            assert dsn.password == trial["POSTGRES_PASSWORD"], w.where
            service = one(docs, "Service", "fabricmon-timescaledb")
            assert [p["port"] for p in service["spec"]["ports"]] == [5432]
        else:
            assert config.database.dsn.get_secret_value() == secrets["FABRICMON_DSN"], w.where
        assert [t.get_secret_value() for t in config.api.tokens] == [secrets["FABRICMON_API_TOKEN"]]
        (hook,) = config.alerts.webhooks
        assert hook.secret is not None and hook.secret.get_secret_value() == secrets["FABRICMON_WEBHOOK_SECRET"]
        fabric = fabric_for(config)
        assert fabric.gpus == int(env["FABRICMON_GPUS"])
        the_plan = plan(config, fabric)
        assert the_plan.unmatched == [] and the_plan.switches == len(fabric.switches), w.where
        communities = {t.community.get_secret_value() for t in the_plan.targets["snmp"] if t.community}
        assert communities == {secrets["FABRICMON_SNMP_COMMUNITY"]}


@pytest.mark.parametrize("name", RENDERS)
def test_secrets_travel_in_secrets_only(rendered: dict[str, list[Doc]], name: str) -> None:
    docs = rendered[name]
    for cm in find(docs, "ConfigMap"):
        for key in cm.get("data", {}):
            if key.endswith(".yaml"):
                continue
            assert not SECRET_NAME.search(key), f"ConfigMap/{cm['metadata']['name']}: {key} is a secret"
    for doc in docs:
        if doc["kind"] not in WORKLOADS:
            continue
        for container in containers(doc):
            for var in container.get("env", []):
                if SECRET_NAME.search(var["name"]) and "value" in var:
                    # Only a template of secrets, e.g. the trial's DSN with $(POSTGRES_PASSWORD).
                    refs = set(_REF.findall(var["value"])) - {""}
                    assert refs, f"{doc['metadata']['name']}: {var['name']} inline"
    # secrets.env.example lists exactly the base's secrets; used as it says, it replaces them all.
    secret = _secret_data(generated(docs, "Secret", "fabricmon-secrets"))
    example = read_env_file(SECRETS_EXAMPLE.read_text(encoding="utf-8"))
    assert set(secret) == set(example)
    if RENDERS[name][2]:
        assert secret == read_env_file(filled_in_secrets())
    else:  # the placeholders are marked, so that an operator (and a reviewer) sees what to replace
        for doc in find(docs, "Secret"):
            assert all("REPLACE-ME" in v for v in _secret_data(doc).values()), doc["metadata"]["name"]
    # Every ${VAR} the config file uses is provided: secrets by the Secret, the rest by the settings.
    settings = generated(docs, "ConfigMap", "fabricmon-settings")["data"]
    config = yaml.safe_load(generated(docs, "ConfigMap", "fabricmon-config")["data"]["fabricmon.yaml"])
    for var in config_refs(config):
        assert var in (secret if SECRET_NAME.search(var) else settings), var


# -- ports, probes, network policies ------------------------------------------------------------------


@pytest.mark.parametrize("name", RENDERS)
def test_probes_and_services_use_the_ports_the_commands_listen_on(
    rendered: dict[str, list[Doc]], name: str, tmp_path: Path
) -> None:
    docs = rendered[name]
    probed = set()
    for w in fabricmon_workloads(docs, fabricmon_image(name)):
        args = parse(w, docs)
        config, _ = config_of(w, docs, tmp_path)
        c = w.container
        if w.component == "collector":
            port = int(args.metrics_listen.rsplit(":", 1)[1])
            for probe in ("startupProbe", "livenessProbe"):
                assert c[probe]["httpGet"]["path"] == "/metrics", f"{w.where}: {probe}"
                assert container_port(c, c[probe]["httpGet"]["port"]) == port, f"{w.where}: {probe}"
            service = one(docs, "Service", "fabricmon-collector")
        elif w.component == "api":
            port = int((args.listen or config.api.listen).rsplit(":", 1)[1])
            paths = {"startupProbe": "/healthz", "livenessProbe": "/healthz", "readinessProbe": "/readyz"}
            for probe, path in paths.items():
                assert c[probe]["httpGet"]["path"] == path, f"{w.where}: {probe}"
                assert container_port(c, c[probe]["httpGet"]["port"]) == port, f"{w.where}: {probe}"
                assert path in config.api.open_routes, f"{path} needs a token: the kubelet has none"
            service = one(docs, "Service", "fabricmon-api")
        else:
            assert not any(k.endswith("Probe") for k in c), f"{w.where}: a probe on a process that serves none"
            continue
        probed.add(w.component)
        (service_port,) = service["spec"]["ports"]
        assert container_port(c, service_port["targetPort"]) == port
    assert probed == {"collector", "api"}


def _allows(rules: list[Doc], port: int, protocol: str) -> bool:
    """Whether any rule lets ``port``/``protocol`` through (to or from anywhere the rule says)."""
    for rule in rules:
        ports = rule.get("ports")
        if ports is None or any(p.get("port") == port and p.get("protocol", "TCP") == protocol for p in ports):
            return True
    return False


@pytest.mark.parametrize("name", RENDERS)
def test_network_policies_let_through_what_the_config_needs(
    rendered: dict[str, list[Doc]], name: str, tmp_path: Path
) -> None:
    docs = rendered[name]
    for w in fabricmon_workloads(docs, fabricmon_image(name)):
        labels = w.doc["spec"]["template"]["metadata"]["labels"]
        (policy,) = [p for p in find(docs, "NetworkPolicy") if matches(p["spec"]["podSelector"]["matchLabels"], labels)]
        assert set(policy["spec"]["policyTypes"]) == {"Ingress", "Egress"}, w.where
        egress, ingress = policy["spec"].get("egress", []), policy["spec"].get("ingress", [])
        config, _ = config_of(w, docs, tmp_path)
        assert config.database.dsn is not None
        needed = [(53, "UDP"), (urlsplit(config.database.dsn.get_secret_value()).port or 5432, "TCP")]
        if w.component == "collector":
            for target in (t for targets in plan(config, fabric_for(config)).targets.values() for t in targets):
                needed.append((target.host_port[1], "UDP" if target.protocol == "snmp" else "TCP"))
        if w.component == "analyzer":
            for hook in config.alerts.webhooks:
                needed.append((hook.url.port or (443 if hook.url.scheme == "https" else 80), "TCP"))
        for port, protocol in set(needed):
            assert _allows(egress, port, protocol), f"{w.where}: egress to {port}/{protocol} refused"
        listens = {"collector": 9108, "api": int(config.api.listen.rsplit(":", 1)[1])}
        if w.component in listens:
            assert _allows(ingress, listens[w.component], "TCP"), f"{w.where}: ingress refused"
        else:
            assert ingress == [], f"{w.where}: serves nothing, so takes nothing in"
    if "trial" in name:
        db = one(docs, "NetworkPolicy", "fabricmon-timescaledb")
        (rule,) = db["spec"]["ingress"]
        assert _allows([rule], 5432, "TCP")
        (peer,) = rule["from"]
        for w in fabricmon_workloads(docs, fabricmon_image(name)):
            assert matches(peer["podSelector"]["matchLabels"], w.doc["spec"]["template"]["metadata"]["labels"])


# -- shards and sizing -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", OVERLAYS)
def test_the_shards_partition_the_fabric(rendered: dict[str, list[Doc]], name: str, tmp_path: Path) -> None:
    docs = rendered[name]
    collectors = [w for w in fabricmon_workloads(docs, fabricmon_image(name)) if w.component == "collector"]
    config, _ = config_of(collectors[0], docs, tmp_path)
    fabric = fabric_for(config)
    seen: list[str] = []
    if parse(collectors[0], docs).shard == "auto":  # the leases' shards, whichever pods hold them
        assert config.collector.shards is not None
        shards = [f"{i}/{config.collector.shards}" for i in range(config.collector.shards)]
    else:
        shards = [parse(w, docs).shard for w in collectors]
    for shard in shards:
        shard_plan = plan(config, fabric, shard)
        seen += [t.switch for targets in shard_plan.targets.values() for t in targets]
    assert sorted(seen) == sorted(fabric.switches), "every switch in exactly one shard"


@pytest.mark.parametrize("name", OVERLAYS)
def test_the_overlay_follows_the_sizing_rule(rendered: dict[str, list[Doc]], name: str, tmp_path: Path) -> None:
    docs = rendered[name]
    workloads = {w.component: w for w in fabricmon_workloads(docs, fabricmon_image(name))}
    collector = workloads["collector"]
    config, _ = config_of(collector, docs, tmp_path)
    fabric = fabric_for(config)
    ports = sum(sw.radix for sw in fabric.switches.values())
    values = ports * VALUES_PER_PORT / config.collector.gnmi_interval_s
    shards = collector.doc["spec"]["replicas"]
    per_shard = values / shards
    assert per_shard <= VALUES_PER_PROCESS, f"{shards} shard(s) for {values:,.0f} values/s: too few"
    assert shards == 1 or values / (shards - 1) > VALUES_PER_PROCESS, f"{shards} shards: one less would do"
    if name == "16k":
        assert (fabric.gpus, ports, shards) == (16384, 81920, 2)  # the sizing page's example
    resources = collector.container["resources"]
    assert "cpu" not in resources.get("limits", {}), "a throttled collector falls behind its switches"
    assert quantity(resources["requests"]["cpu"]) >= per_shard / VALUES_PER_CPU_S
    memory = RSS_PER_SHARD * min(1.0, per_shard / MEASURED_VALUES_PER_SHARD)
    assert quantity(resources["requests"]["memory"]) >= memory
    assert quantity(resources["limits"]["memory"]) >= 2 * quantity(resources["requests"]["memory"])
    (claim,) = collector.doc["spec"]["volumeClaimTemplates"]
    spool = SPOOL_TABLES * config.database.writer.spool_max_mb * 2**20
    assert quantity(claim["spec"]["resources"]["requests"]["storage"]) >= spool, "the spool outgrows its volume"
    spool_dir = "/var/lib/fabricmon"
    assert any(m["name"] == "spool" and m["mountPath"] == spool_dir for m in collector.container["volumeMounts"])
    assert container_env(collector, docs).get("FABRICMON_DATA_DIR", spool_dir) == spool_dir  # the image's
    analyzer = workloads["analyzer"].container["resources"]
    assert quantity(analyzer["requests"]["cpu"]) >= ANALYZER_EVALUATION_S / config.analyzer.interval_s
    for w in workloads.values():
        r = w.container["resources"]
        assert "cpu" not in r.get("limits", {}), w.where
        assert quantity(r["limits"]["memory"]) >= quantity(r["requests"]["memory"]), w.where


# -- the image and the Prometheus Operator -----------------------------------------------------------------


@pytest.mark.parametrize("name", OVERLAYS)
def test_one_image_of_this_version(rendered: dict[str, list[Doc]], name: str) -> None:
    image = fabricmon_image(name)
    assert image.rsplit(":", 1)[1] == _pyproject_version(), "the overlay's image tag is the project's version"
    used = {w.container["image"] for w in fabricmon_workloads(rendered[name], image)}
    assert used == {image}
    assert {w.container.get("imagePullPolicy") for w in fabricmon_workloads(rendered[name], image)} == {"IfNotPresent"}


def _pyproject_version() -> str:
    match = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(encoding="utf-8"), re.MULTILINE)
    assert match
    return match.group(1)


def rule_groups() -> list[Doc]:
    groups: list[Doc] = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    return groups


@pytest.mark.parametrize("name", [*OVERLAYS, "small+trial"])
def test_prometheus_operator_objects(rendered: dict[str, list[Doc]], name: str) -> None:
    docs = rendered[name]
    (monitor,) = find(docs, "ServiceMonitor")
    selected = [
        s for s in find(docs, "Service") if matches(monitor["spec"]["selector"]["matchLabels"], s["metadata"]["labels"])
    ]
    assert {s["metadata"]["name"] for s in selected} == {"fabricmon-collector", "fabricmon-api"}
    # The job label is the Service's name; FabricmonTargetDown keys on up{job=~"fabricmon.*"}.
    assert all(s["metadata"]["name"].startswith("fabricmon") for s in selected)
    endpoints = monitor["spec"]["endpoints"]
    port_names = {p["name"] for s in selected for p in s["spec"]["ports"]}
    assert {e["port"] for e in endpoints} == port_names, "one endpoint per metrics port"
    for e in endpoints:
        assert e["path"] == "/metrics" and re.fullmatch(r"\d+[smh]", e["interval"]), e
    (rule,) = find(docs, "PrometheusRule")
    assert set(rule["spec"]) == {"groups"}
    assert rule["spec"]["groups"] == rule_groups(), "PrometheusRule differs from deploy/prometheus/fabricmon-rules.yml"
    for group in rule["spec"]["groups"]:
        assert group["name"] and group["rules"], group
        for r in group["rules"]:
            assert ("alert" in r) != ("record" in r) and isinstance(r["expr"], str), r
            assert set(r) <= {"alert", "record", "expr", "for", "keep_firing_for", "labels", "annotations"}, r


def test_the_prometheus_rule_is_generated_from_the_rule_file() -> None:
    done = subprocess.run(
        [sys.executable, str(SYNC_RULES), "--check"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    generated = yaml.safe_load(SYNC_RULES.with_name("prometheusrule.yaml").read_text(encoding="utf-8"))
    assert generated["spec"]["groups"] == rule_groups()


@pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="promtool not installed: Debian package `prometheus` (make setup installs it)",
)
def test_the_prometheus_rule_passes_promtool(rendered: dict[str, list[Doc]], tmp_path: Path) -> None:
    (rule,) = find(rendered["16k"], "PrometheusRule")
    extracted = tmp_path / "rules.yml"
    extracted.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}), encoding="utf-8")
    done = subprocess.run(
        [str(shutil.which("promtool")), "check", "rules", str(extracted)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr

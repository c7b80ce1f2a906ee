"""Write prometheusrule.yaml from deploy/prometheus/fabricmon-rules.yml, so the two cannot drift.

The PrometheusRule's ``spec.groups`` are the rule file's ``groups``. They are re-emitted as data,
multi-line expressions as literal blocks, rather than copied as text: kustomize re-serialises every
document, and it changes the value of a folded block (``>-``) that holds more-indented lines (it
adds a blank line), which the rule file's multi-line expressions are. Run after editing the rule
file; ``--check`` exits 1 when prometheusrule.yaml is stale (tests/integration/test_kubernetes.py
checks the same, and that the kustomize render holds the same groups).

    python deploy/kubernetes/components/prometheus-operator/sync_prometheus_rules.py [--check]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
RULES = HERE.parents[2] / "prometheus" / "fabricmon-rules.yml"
OUTPUT = HERE / "prometheusrule.yaml"

HEADER = """\
# GENERATED from deploy/prometheus/fabricmon-rules.yml by sync_prometheus_rules.py (next to this
# file): edit the rule file, then run the script. fabricmon's own health rules for the Prometheus
# Operator; what each alert means is said in the rule file's comments and annotations.
"""


class _Dumper(yaml.SafeDumper):
    """Block style, multi-line strings as literal blocks (which kustomize keeps as they are)."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)  # list items indented under their key


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def render(rules_text: str) -> str:
    """The PrometheusRule holding a rule file's groups."""
    rules: Any = yaml.safe_load(rules_text)
    if not isinstance(rules, dict) or not isinstance(rules.get("groups"), list):
        raise ValueError(f"{RULES}: no top-level 'groups' list")
    doc = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "fabricmon", "labels": {"app.kubernetes.io/name": "fabricmon"}},
        "spec": {"groups": rules["groups"]},
    }
    return HEADER + yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True)


def main(argv: list[str]) -> int:
    wanted = render(RULES.read_text(encoding="utf-8"))
    if argv == ["--check"]:
        if OUTPUT.read_text(encoding="utf-8") != wanted:
            print(f"{OUTPUT} is stale: run {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    if argv:
        print(f"usage: {Path(__file__).name} [--check]", file=sys.stderr)
        return 2
    OUTPUT.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

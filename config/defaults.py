"""Every configuration key with its default, as YAML: ``python -m config.defaults``.

docs/config-defaults.yaml is this output; a test keeps it in step with the code.
"""

from __future__ import annotations

import sys

import yaml

from config.model import Config
from schedulers.config import SlurmConfig

HEADER = """\
# Every fabricmon configuration key with its default (generated: python -m config.defaults).
# `targets` is empty by default; see docs/reference/config.md for a worked example. Secrets are shown as null.
"""


def _commented(title: str, data: object) -> str:
    body = yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
    return f"\n# {title}\n" + "".join(f"# {line}\n" for line in body.splitlines())


def render() -> str:
    """The defaults as YAML text, then the defaults of sections that are absent unless set."""
    data = Config().model_dump(mode="json")
    slurm = {"schedulers": {"slurm": SlurmConfig().model_dump(mode="json")}}
    return (
        HEADER
        + yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
        + _commented(
            "schedulers.slurm is absent by default (no scheduler is driven); once set, its keys default to:", slurm
        )
    )


if __name__ == "__main__":
    sys.stdout.write(render())

"""Every configuration key with its default, as YAML: ``python -m config.defaults``.

docs/config-defaults.yaml is this output; a test keeps it in step with the code.
"""

from __future__ import annotations

import sys

import yaml

from config.model import Config

HEADER = """\
# Every fabricmon configuration key with its default (generated: python -m config.defaults).
# `targets` is empty by default; see README.md for a worked example. Secrets are shown as null.
"""


def render() -> str:
    """The defaults as YAML text."""
    data = Config().model_dump(mode="json")
    return HEADER + yaml.safe_dump(data, sort_keys=False, default_flow_style=False)


if __name__ == "__main__":
    sys.stdout.write(render())

"""The packages import one way: ``lint-imports`` (``make lint``) checks the contracts in
pyproject.toml; these tests keep the contracts covering every package, and loading the config light."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_contracts_cover_every_package_fabricmon_ships() -> None:
    shipped = set(PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"])
    assert set(PYPROJECT["tool"]["importlinter"]["root_packages"]) == shipped


def test_wire_is_fenced_from_every_other_package() -> None:
    (fence,) = [c for c in PYPROJECT["tool"]["importlinter"]["contracts"] if c.get("source_modules") == ["wire"]]
    assert fence["type"] == "forbidden"
    assert set(fence["forbidden_modules"]) == set(PYPROJECT["tool"]["importlinter"]["root_packages"]) - {"wire"}


def test_loading_the_config_imports_no_hot_path_database_or_c_loader() -> None:
    """``fabricmon`` loads its config before it knows what it will run: that must not pull in the
    collector's counters, the C speedups and their loader, or the database driver."""
    probe = (
        "import sys, config.loader\n"
        "print('\\n'.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'cli','collector','analyzer','schedulers','api','store','fabric','wire','simulator','demo','drill','discovery'})))"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = set(out.stdout.split())
    heavy = {"collector.counters", "collector.speedups", "collector._speedups", "fabric.native", "store.db"}
    assert not loaded & heavy, sorted(loaded & heavy)
    assert "asyncpg" not in out.stdout
    # only the sections' own modules and the leaves they name
    assert all(m.endswith(".config") or m in {"collector.clock", "fabric.errors", "schedulers.node_map"}
               or "." not in m for m in loaded), sorted(loaded)  # fmt: skip

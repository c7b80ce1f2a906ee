"""Build hook: compile fabricmon's C extensions at install.

``collector/_speedups.c`` is the collector's per-value path (decode, counter deltas);
``store/_copy_binary.c`` encodes the writers' rows as PostgreSQL's binary COPY stream. With a C
compiler and Python's headers each is built next to its source (so an editable install imports it
too) and goes into the wheel, which is then tagged for this interpreter and platform. Without them
the build warns and goes on: fabricmon runs the same work in Python (collector/speedups.py,
store/copy_binary.py), only slower.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = Path("collector") / "_speedups.c"
SOURCES = (SOURCE, Path("store") / "_copy_binary.c")


def compile_speedups(root: Path, source: Path = SOURCE) -> Path | None:
    """The built extension's path, or None (and a warning on stderr) when it cannot be built."""
    src = root / source
    out = src.with_name(src.stem + str(sysconfig.get_config_var("EXT_SUFFIX") or ".so"))
    if out.exists() and out.stat().st_mtime >= src.stat().st_mtime:
        return out
    out.unlink(missing_ok=True)  # a failed build must not leave an older module to be imported
    cc = shlex.split(os.environ.get("CC") or str(sysconfig.get_config_var("CC") or "cc"))
    include = sysconfig.get_paths()["include"]
    part = out.with_name(out.name + ".part")  # in place only once whole: a killed build leaves no module
    cmd = [*cc, "-O2", "-shared", "-fPIC", "-Wall", f"-I{include}", str(src), "-o", str(part)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        part.unlink(missing_ok=True)
        print(f"fabricmon: C speedups not built ({source}: {e}); running the Python path", file=sys.stderr)
        return None
    if done.returncode != 0:
        part.unlink(missing_ok=True)
        print(f"fabricmon: C speedups not built ({source}): {' '.join(cmd)}\n{done.stderr}", file=sys.stderr)
        return None
    os.replace(part, out)
    return out


class SpeedupsHook(BuildHookInterface):  # type: ignore[type-arg, misc, unused-ignore]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        for source in SOURCES:
            built = compile_speedups(Path(self.root), source)
            if built is None:
                continue
            build_data["pure_python"] = False
            build_data["infer_tag"] = True
            if version != "editable":  # an editable install imports it from the source tree
                build_data["force_include"][str(built)] = f"{source.parent.as_posix()}/{built.name}"

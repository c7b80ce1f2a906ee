"""The C extensions built with ``-fsanitize=address,undefined``, run over the fuzz corpora (slow).

Both extensions (collector/_speedups.c, store/_copy_binary.c) are compiled into a temporary
directory and loaded ahead of the normal build by a small pytest plugin that extends the
``collector`` and ``store`` package paths, in a child interpreter with libasan preloaded (an
ASan extension in a Python that is not built with ASan needs its runtime loaded first) and
``PYTHONMALLOC=malloc`` (so ASan sees every object's memory, not pymalloc's arenas). UBSan
aborts on the first finding (``-fno-sanitize-recover``); ASan exits non-zero on its first.
The child runs the gNMI corpus and a hypothesis batch of both decoders, the C-against-Python
property tests of both extensions (the link-health decoder's ``optics_pairs`` and
``optics_slots`` among them), and the mutation cases of issue 28 (9), which ASan reported as a
heap-use-after-free before the fix.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

import hatch_build
from tests.unit.collector.test_speedups_mutation import CASE_IDS, CASES, SETUP

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]
FLAGS = ["-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]

PLUGIN = """
import collector
import store

collector.__path__.insert(0, {collector!r})
store.__path__.insert(0, {store!r})

from collector import speedups
from store import copy_binary

for name, module in (("collector", speedups._module), ("store", copy_binary._module)):
    assert module is not None and module.__file__.startswith({root!r}), (name, module)
"""


def _runtime() -> str | None:
    cc = shutil.which("gcc")
    if cc is None:
        return None
    found = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True, text=True, check=False)
    path = found.stdout.strip()
    return path if os.path.isabs(path) and os.path.exists(path) else None


@pytest.fixture(scope="module")
def sanitized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The child's environment: the sanitized builds first on the packages' paths."""
    libasan = _runtime()
    if libasan is None:
        pytest.skip("gcc with libasan is not installed")
    root = tmp_path_factory.mktemp("asan")
    include = sysconfig.get_paths()["include"]
    suffix = str(sysconfig.get_config_var("EXT_SUFFIX") or ".so")
    for source in hatch_build.SOURCES:
        out = root / source.parent / (source.stem + suffix)
        out.parent.mkdir(exist_ok=True)
        cmd = ["gcc", *FLAGS, "-shared", "-fPIC", "-Wall", f"-I{include}", str(ROOT / source), "-o", str(out)]
        subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    plugin = PLUGIN.format(collector=str(root / "collector"), store=str(root / "store"), root=str(root))
    (root / "fabricmon_asan.py").write_text(textwrap.dedent(plugin))
    return dict(
        os.environ,
        LD_PRELOAD=libasan,
        ASAN_OPTIONS="detect_leaks=0:abort_on_error=0:exitcode=86",
        UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1",
        PYTHONMALLOC="malloc",
        PYTHONPATH=str(root),
        FABRICMON_FUZZ_EXAMPLES="300",
    )


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=3000, check=False
    )


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_the_fast_paths_with_their_updates_emptied_are_clean_under_asan(sanitized: dict[str, str], case: str) -> None:
    code = "import fabricmon_asan\n" + textwrap.dedent(SETUP) + textwrap.dedent(case)
    done = _run(["-c", code], sanitized)
    assert (done.returncode, done.stdout.strip()) == (0, "40 True"), done.stderr[-4000:]


def test_the_corpora_and_property_tests_are_clean_under_asan_and_ubsan(sanitized: dict[str, str]) -> None:
    tests = [
        "tests/unit/collector/test_gnmi_fuzz.py",
        "tests/unit/collector/test_speedups.py",
        "tests/unit/collector/test_speedups_optics.py",
        "tests/unit/store/test_copy_binary.py",
    ]
    done = _run(
        ["-m", "pytest", "-p", "fabricmon_asan", "-p", "no:cacheprovider", "-q", "-x", "-m", "not slow", *tests],
        sanitized,
    )
    tail = (done.stdout[-3000:] + done.stderr[-6000:]).strip()
    assert done.returncode == 0, tail
    assert "AddressSanitizer" not in done.stderr and "runtime error" not in done.stderr, tail

"""The dashboard's static files: uPlot vendored exactly as pinned (with its licence), nothing loaded
from another origin, and every ES module import naming a file and an export that exist (the browser
suite loads each view; this catches a broken import before a browser is needed)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from api.routes.dashboard import STATIC

VENDOR = STATIC / "vendor" / "uplot"
IMPORT = re.compile(r'import\s*\{([^}]*)\}\s*from\s*"([^"]+)"', re.S)
EXPORT = re.compile(r"export\s+(?:async\s+)?(?:function|const|let|class)\s+([A-Za-z_$][\w$]*)")


def ours() -> list[Path]:
    return [p for p in STATIC.rglob("*") if p.is_file() and VENDOR not in p.parents]


def test_uplot_is_vendored_as_pinned_with_its_licence() -> None:
    meta = json.loads((VENDOR / "VENDOR.json").read_text())
    assert meta["package"] == "uplot" and re.fullmatch(r"\d+\.\d+\.\d+", meta["version"])
    assert meta["integrity"].startswith("sha512-")
    for name, digest in meta["sha256"].items():
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == digest, name
    licence = (VENDOR / "LICENSE").read_text()
    assert "MIT License" in licence and "Leon Sorokin" in licence and meta["license"] == "MIT"
    page = (STATIC / "index.html").read_text()
    assert "/dashboard/vendor/uplot/uPlot.iife.min.js" in page and "/dashboard/vendor/uplot/uPlot.min.css" in page


def test_nothing_is_loaded_from_another_origin() -> None:
    """No URL with a scheme or a protocol-relative one anywhere in our files (HTML attributes, JS
    strings and template literals, CSS ``url()``): everything is served from /dashboard/."""
    for path in ours():
        text = path.read_text()
        assert not re.search(r"[a-z][a-z0-9+.-]*://", text, re.I), path
        assert not re.search(r"""["'`(]\s*//[a-z0-9]""", text, re.I), path
        assert not re.search(r"url\(\s*['\"]?(?!data:)[a-z]+:", text, re.I), path


def test_every_import_names_a_module_and_an_export_that_exist() -> None:
    modules = [p for p in ours() if p.suffix == ".js"]
    assert len(modules) >= 9
    for path in modules:
        for names, target in IMPORT.findall(path.read_text()):
            source = (path.parent / target).resolve()
            assert source.is_file(), f"{path.name}: no module {target}"
            exported = set(EXPORT.findall(source.read_text()))
            for name in (n.strip().split(" as ")[0] for n in names.split(",") if n.strip()):
                assert name in exported, f"{path.name} imports {name} from {target}, which does not export it"

"""Which page holds which generated block, and the whole files written beside them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from docs_gen import cli_ref, config_ref, rest_ref
from docs_gen.blocks import block, splice

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
OPENAPI = DOCS / "reference" / "openapi.json"

#: (page, block name, what renders the block)
BLOCKS: tuple[tuple[Path, str, Callable[[], str]], ...] = (
    (DOCS / "reference" / "cli.md", "cli", cli_ref.render),
    (DOCS / "reference" / "config.md", "config", config_ref.render),
    (DOCS / "reference" / "rest-api.md", "rest", lambda: rest_ref.render(rest_ref.document())),
)


def expected() -> dict[Path, str]:
    """Every generated file's text as the code makes it now."""
    out = {OPENAPI: rest_ref.text(rest_ref.document())}
    for page, name, render in BLOCKS:
        current = out.get(page) or page.read_text(encoding="utf-8")
        out[page] = splice(current, name, render())
    return out


def outdated() -> list[Path]:
    """The generated files whose committed text differs from what the code makes."""
    stale = []
    for path, text in expected().items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            stale.append(path)
    return stale


def write() -> list[Path]:
    """Write every generated file; returns those that changed."""
    changed = []
    for path, text in expected().items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(path)
    return changed


__all__ = ["BLOCKS", "OPENAPI", "ROOT", "block", "expected", "outdated", "write"]

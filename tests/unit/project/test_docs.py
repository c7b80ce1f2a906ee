"""The documentation site: generated reference pages are current, the README stays short.

The CLI, configuration and REST references are generated (``python -m docs_gen``) from the argparse
parsers, the pydantic configuration models and the API's ``/openapi.json``; the committed pages
must be what the code generates now. ``mkdocs build --strict`` itself runs in ``make lint``.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest
from pydantic import Field

from config.model import Config
from docs_gen import cli_ref, config_ref, pages, rest_ref
from docs_gen.blocks import MissingBlock, block, cell, splice
from docs_gen.mkdocs_hooks import unescape_table_code

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
#: "The README fits on two screens" (issue 27): what, why, the two commands, the architecture, links.
README_MAX_BYTES = 10 * 1024


def test_the_generated_pages_are_current() -> None:
    stale = [str(p.relative_to(ROOT)) for p in pages.outdated()]
    assert not stale, f"{stale} differ from what the code generates: run python -m docs_gen"


def test_a_new_flag_makes_the_cli_page_outdated(monkeypatch: pytest.MonkeyPatch) -> None:
    import cli.main

    committed = block((ROOT / "docs/reference/cli.md").read_text(), "cli")
    assert "`--scenario` `NAME|FILE`" in committed.replace("\\|", "|")
    real = cli.main.build_parser

    def with_a_new_flag() -> argparse.ArgumentParser:
        parser = real()
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        sub.choices["slo"].add_argument("--brand-new-flag", help="added without regenerating")
        return parser

    monkeypatch.setattr(cli.main, "build_parser", with_a_new_flag)
    rendered = cli_ref.render()
    assert "`--brand-new-flag`" in rendered and rendered != committed


def test_a_new_config_key_makes_the_config_page_outdated(monkeypatch: pytest.MonkeyPatch) -> None:
    import config.model

    committed = block((ROOT / "docs/reference/config.md").read_text(), "config")

    class Grown(Config):
        #: A key added without regenerating.
        brand_new_key: int = Field(3, ge=1)

    monkeypatch.setattr(config.model, "Config", Grown)
    rendered = config_ref.render()
    assert rendered != committed
    assert "| `brand_new_key` | int | `3` | ≥ 1 | A key added without regenerating. |" in rendered


def test_the_config_page_names_every_key_of_the_defaults() -> None:
    """Every key ``python -m config.defaults`` prints is a row of the generated reference."""
    page = block((ROOT / "docs/reference/config.md").read_text(), "config")

    def keys(data: object) -> set[str]:
        if not isinstance(data, dict):
            return set()
        return set(data) | {k for v in data.values() for k in keys(v)}

    missing = {k for k in keys(Config().model_dump(mode="json")) if f"| `{k}` |" not in page}
    assert not missing


def test_the_user_guide_names_every_rule_and_action() -> None:
    """The analyzer page's checks table and action table cover every rule and action of the code."""
    from typing import get_args

    from analyzer.actions import Action
    from analyzer.engine import RULES_OF

    guide = (ROOT / "docs/guide/analyzer.md").read_text()
    checks, actions = guide.split("**Actions**", 1)
    rules = set().union(*RULES_OF.values())
    assert {r for r in rules if f"`{r}`" not in checks} == set()
    assert {a for a in get_args(Action) if f"`{a}`" not in actions} == set()
    alertmanager = (ROOT / "docs/operations/alertmanager.md").read_text()
    assert {r for r in rules | {"collection"} if f"`{r}`" not in alertmanager} == set()


def test_the_rest_page_is_the_apps_openapi_document() -> None:
    committed = json.loads((ROOT / "docs/reference/openapi.json").read_text())
    doc = rest_ref.document()
    assert committed == doc
    page = block((ROOT / "docs/reference/rest-api.md").read_text(), "rest")
    for path, item in doc["paths"].items():
        for method in item:
            assert f"### `{method.upper()} {path}`" in page


def test_blocks_are_spliced_between_their_markers_only() -> None:
    begin = "<!-- generated:x begin (python -m docs_gen; do not edit by hand) -->"
    page = f"intro\n{begin}\nold\n<!-- generated:x end -->\nend\n"
    new = splice(page, "x", "new | row")
    assert new.startswith("intro\n") and new.endswith("<!-- generated:x end -->\nend\n")
    assert block(new, "x") == "new | row"
    with pytest.raises(MissingBlock):
        splice("no markers", "x", "body")
    assert cell("a ``b``\n| c") == "a `b` \\| c"


def test_table_code_spans_lose_their_pipe_escapes_on_the_site_only() -> None:
    text = "| `a\\|b` | x \\| y |\n```\n| `c\\|d` |\n```\nplain `e\\|f`"
    assert unescape_table_code(text) == "| `a|b` | x \\| y |\n```\n| `c\\|d` |\n```\nplain `e\\|f`"


#: Pages that are history: they name files as they were.
HISTORY = {"docs/decisions.md", "docs/benchmarks-history.md"}


def test_the_files_the_pages_name_exist() -> None:
    """A path such as `store/jobs.py` in a current page names a file of the repository."""
    named = re.compile(r"`([A-Za-z_][\w./-]*/[\w.-]+\.(?:py|c|sql|yml|yaml|json|sh|md))`")
    pages = [ROOT / "README.md", *(p for p in (ROOT / "docs").rglob("*.md") if str(p.relative_to(ROOT)) not in HISTORY)]
    missing = {
        f"{page.relative_to(ROOT)}: {path}"
        for page in pages
        for path in named.findall(page.read_text())
        if "NNNN" not in path and not (ROOT / path).exists()
    }
    assert missing == set()


def test_the_readme_fits_on_two_screens_and_its_links_resolve() -> None:
    text = README.read_text()
    assert len(text.encode()) <= README_MAX_BYTES, f"README.md is {len(text.encode())} bytes"
    for must in ("make demo", "make test", "## Architecture", "docs/"):
        assert must in text
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if "://" not in t]
    assert local, "the README links into the docs"
    assert [t for t in local if not (ROOT / t).exists()] == []

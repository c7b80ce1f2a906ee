"""Generated blocks inside hand-written pages: find, replace, compare."""

from __future__ import annotations

import re

BEGIN = "<!-- generated:{name} begin (python -m docs_gen; do not edit by hand) -->"
END = "<!-- generated:{name} end -->"


class MissingBlock(ValueError):
    """A page lacks the markers of the block it should hold."""


def _span(text: str, name: str) -> tuple[int, int]:
    begin, end = BEGIN.format(name=name), END.format(name=name)
    start = text.find(begin)
    stop = text.find(end)
    if start < 0 or stop < start:
        raise MissingBlock(f"no {begin!r} ... {end!r} block")
    return start + len(begin), stop


def splice(text: str, name: str, body: str) -> str:
    """``text`` with block ``name`` holding ``body`` (one blank line on each side)."""
    start, stop = _span(text, name)
    return text[:start] + "\n\n" + body.strip("\n") + "\n\n" + text[stop:]


def block(text: str, name: str) -> str:
    """What block ``name`` of ``text`` holds now."""
    start, stop = _span(text, name)
    return text[start:stop].strip("\n")


def cell(value: object) -> str:
    """A value fit for one Markdown table cell: one line, pipes escaped."""
    return re.sub(r"\s+", " ", md(str(value))).replace("|", "\\|").strip()


def md(text: str) -> str:
    """reST inline literals (double backquotes, as docstrings write them) as Markdown's."""
    return text.replace("``", "`")

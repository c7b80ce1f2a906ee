"""mkdocs hooks (``hooks:`` in mkdocs.yml).

Table cells escape a pipe inside a code span as ``\\|`` so that the Markdown reads right in a
repository browser (GitHub's tables split on every unescaped pipe); Python-Markdown's tables
already keep a code span's pipes together and would show the backslash. On table rows, the
escape inside code spans is dropped before the page is rendered.
"""

from __future__ import annotations

import re
from typing import Any

CODE = re.compile(r"(`+)(.+?)\1")


def unescape_table_code(markdown: str) -> str:
    """``markdown`` with ``\\|`` turned into ``|`` inside the code spans of table rows."""
    out = []
    fenced = False
    for line in markdown.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not fenced and line.lstrip().startswith("|"):
            line = CODE.sub(lambda m: m.group(1) + m.group(2).replace("\\|", "|") + m.group(1), line)
        out.append(line)
    return "\n".join(out)


def on_page_markdown(markdown: str, **_: Any) -> str:
    return unescape_table_code(markdown)

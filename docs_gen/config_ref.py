"""The configuration reference, from the pydantic models of :mod:`config.model`.

Each section is a :class:`config.base.Section`; a key's meaning is the ``#:`` comment above its
declaration (as Sphinx reads them), its bounds are the field's constraints.
"""

from __future__ import annotations

import ast
import inspect
import json
import textwrap
import types
import typing
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Any

import annotated_types as at
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from config.base import Section
from docs_gen.blocks import cell

BOUNDS = ((at.Ge, "ge", "≥"), (at.Gt, "gt", ">"), (at.Le, "le", "≤"), (at.Lt, "lt", "<"))


def comments(cls: type) -> dict[str, str]:
    """The ``#:`` comment block above each annotated attribute of ``cls``, by attribute name."""
    lines = textwrap.dedent(inspect.getsource(cls)).splitlines()
    tree = ast.parse("\n".join(lines))
    body = tree.body[0]
    assert isinstance(body, ast.ClassDef)
    out: dict[str, str] = {}
    for node in body.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        text: list[str] = []
        row = node.lineno - 2
        while row >= 0 and lines[row].strip().startswith("#:"):
            text.insert(0, lines[row].strip()[2:].strip())
            row -= 1
        if text:
            out[node.target.id] = " ".join(text)
    return out


def _type(tp: Any) -> str:
    if tp is type(None):
        return "null"
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return " | ".join(json.dumps(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type(a) for a in typing.get_args(tp))
    if origin is not None:
        args = ", ".join(_type(a) for a in typing.get_args(tp))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if isinstance(tp, type) and issubclass(tp, Section):
        return "section"
    if tp is SecretStr:
        return "secret"
    if isinstance(tp, type) and issubclass(tp, Path):
        return "path"
    return getattr(tp, "__name__", str(tp)).replace("typing.", "")


def _sections(tp: Any) -> Iterator[tuple[type[Section], bool]]:
    """The sections an annotation holds, each with whether it is a list of them."""
    if isinstance(tp, type) and issubclass(tp, Section):
        yield tp, False
        return
    origin = typing.get_origin(tp)
    for arg in typing.get_args(tp):
        for section, listed in _sections(arg):
            yield section, listed or origin is list


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return None
    if isinstance(value, SecretStr):
        return "(secret)"
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    return value


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]
    if value is PydanticUndefined or isinstance(value, BaseModel):
        return ""
    value = _plain(value)
    if isinstance(value, list | tuple | dict):
        value = json.loads(json.dumps(value, default=lambda v: _plain(v) if not isinstance(v, str) else v))
    return f"`{json.dumps(value, ensure_ascii=False)}`"


def _bounds(field: FieldInfo) -> str:
    out = []
    for meta in field.metadata:
        for kind, attr, sign in BOUNDS:
            if isinstance(meta, kind):
                out.append(f"{sign} {getattr(meta, attr)}")
        if isinstance(meta, at.MinLen):
            out.append(f"at least {meta.min_length} long")
        if isinstance(meta, at.MaxLen):
            out.append(f"at most {meta.max_length} long")
    return ", ".join(out)


def _walk(cls: type[Section], prefix: str, seen: set[str]) -> Iterator[str]:
    """The section's table, then each section it holds. The root (prefix "") is the file itself."""
    if prefix in seen:
        return
    seen.add(prefix)
    yield f"### `{prefix}`" if prefix else "### The file's top level"
    yield ""
    if cls.__doc__:
        yield cell(inspect.cleandoc(cls.__doc__))
        yield ""
    notes = comments(cls)
    rows = []
    nested: list[tuple[str, type[Section]]] = []
    for name, field in cls.model_fields.items():
        cells = (f"`{name}`", cell(_type(field.annotation)), _default(field), _bounds(field), cell(notes.get(name, "")))
        rows.append("| " + " | ".join(cells) + " |")
        key = f"{prefix}.{name}" if prefix else name
        for section, listed in _sections(field.annotation):
            nested.append((key + ("[]" if listed else ""), section))
    yield "| key | type | default | bounds | meaning |"
    yield "|---|---|---|---|---|"
    yield from rows
    yield ""
    for key, note in sorted(cls.removed_keys.items()):
        yield f"Removed: `{prefix}.{key}` ({cell(note)}); a file that still sets it is refused."
        yield ""
    for key, section in nested:
        yield from _walk(section, key, seen)


def render() -> str:
    """The reference of every configuration section, as Markdown."""
    from config import model

    return "\n".join(_walk(model.Config, "", set()))

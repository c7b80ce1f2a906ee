"""The REST reference, from the ``/openapi.json`` the API application serves.

The document is taken from an application built by :func:`api.app.create_app` (no server, no
database: the pool is only opened at start-up), configured with a bearer token so that the
protected operations show their ``401`` and security requirement.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from typing import Any

from docs_gen.blocks import cell, md

METHODS = ("get", "post", "put", "patch", "delete")


@functools.cache
def document() -> dict[str, Any]:
    """The application's OpenAPI document, as ``GET /openapi.json`` serves it."""
    from api.app import create_app
    from api.config import ApiConfig
    from api.routes.base import OPENAPI
    from config.model import Config
    from fabric.model import FabricParams
    from fabric.topology import build_aipod

    config = Config(api=ApiConfig(tokens=["token"]))
    app = create_app(config, build_aipod(FabricParams(gpus=64)), dsn="postgresql://docs.invalid/unused")
    data: dict[str, Any] = json.loads(app[OPENAPI])
    return data


def text(doc: Mapping[str, Any]) -> str:
    """The document as committed beside the page (docs/reference/openapi.json)."""
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


def _ref(ref: str) -> str:
    name = ref.rsplit("/", 1)[-1]
    return f"[{name}](#{name.lower()})"


def _bounds(schema: Mapping[str, Any]) -> list[str]:
    extra = [schema["format"]] if "format" in schema else []
    for key, word in (
        ("minimum", "≥"),
        ("exclusiveMinimum", ">"),
        ("maximum", "≤"),
        ("exclusiveMaximum", "<"),
        ("minLength", "length ≥"),
        ("maxLength", "length ≤"),
        ("minItems", "items ≥"),
        ("maxItems", "items ≤"),
    ):
        if key in schema:
            extra.append(f"{word} {schema[key]}")
    if "pattern" in schema:
        extra.append(f"pattern `{schema['pattern']}`")
    return extra


def schema_type(schema: Mapping[str, Any]) -> str:
    """One line saying what a JSON Schema accepts."""
    if "$ref" in schema:
        return _ref(schema["$ref"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " or ".join(schema_type(s) for s in schema[key])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        return " | ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    kind = schema.get("type", "any")
    if isinstance(kind, list):
        kind = " or ".join(kind)
    if kind == "array":
        kind = f"array of {schema_type(schema.get('items', {}))}"
    elif kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        kind = f"object of {schema_type(schema['additionalProperties'])}"
    extra = _bounds(schema)
    return str(kind) + (f" ({', '.join(extra)})" if extra else "")


def _operation(method: str, path: str, op: Mapping[str, Any]) -> Iterator[str]:
    yield f"### `{method.upper()} {path}`"
    yield ""
    yield cell(op.get("summary", ""))
    yield ""
    if "description" in op:
        yield md(op["description"].strip())
        yield ""
    if "security" in op:
        yield "Needs `Authorization: Bearer <token>` when `api.tokens` is set."
        yield ""
    params = op.get("parameters", [])
    if params:
        yield "| parameter | in | required | type | meaning |"
        yield "|---|---|---|---|---|"
        for p in params:
            schema = p.get("schema", {})
            default = f"; default `{json.dumps(schema['default'])}`" if "default" in schema else ""
            yield (
                f"| `{p['name']}` | {p['in']} | {'yes' if p.get('required') else 'no'} | "
                f"{cell(schema_type(schema))} | {cell(p.get('description', ''))}{cell(default)} |"
            )
        yield ""
    body = op.get("requestBody")
    if body:
        for media, content in body.get("content", {}).items():
            yield f"Body ({media}{', required' if body.get('required') else ''}): {schema_type(content['schema'])}"
            yield ""
    yield "| status | meaning | body |"
    yield "|---|---|---|"
    for status, response in op.get("responses", {}).items():
        bodies = [f"{media}: {schema_type(c.get('schema', {}))}" for media, c in response.get("content", {}).items()]
        yield f"| {status} | {cell(response.get('description', ''))} | {cell('; '.join(bodies))} |"
    yield ""


def _schema(name: str, schema: Mapping[str, Any]) -> Iterator[str]:
    yield f"### {name}"
    yield ""
    if "description" in schema:
        yield cell(schema["description"])
        yield ""
    props = schema.get("properties", {})
    if not props:
        yield f"Type: {schema_type(schema)}"
        yield ""
        return
    required = set(schema.get("required", []))
    yield "| field | type | required | meaning |"
    yield "|---|---|---|---|"
    for field, prop in props.items():
        yield (
            f"| `{field}` | {cell(schema_type(prop))} | {'yes' if field in required else 'no'} | "
            f"{cell(prop.get('description', ''))} |"
        )
    yield ""


def render(doc: Mapping[str, Any]) -> str:
    """Every operation, then every schema, as Markdown."""
    out = ["## Operations", ""]
    for path, item in doc["paths"].items():
        for method in METHODS:
            if method in item:
                out += list(_operation(method, path, item[method]))
    out += ["## Schemas", ""]
    for name, schema in doc["components"]["schemas"].items():
        out += list(_schema(name, schema))
    return "\n".join(out)

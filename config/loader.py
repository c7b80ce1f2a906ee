"""Load the configuration from YAML plus ``FABRICMON_*`` environment overrides.

Errors name the key and, when it came from the file, the file and line: a typo, a missing
key or a wrong type is one line, e.g. ``fabricmon.yaml:12: database.dsm: unknown key
(did you mean 'dsn'?)``. A key that a section has dropped says so and what replaces it
(``collector.queue_rows: removed key (...): delete it``; see ``Section.removed_keys``).

Environment overrides use ``__`` between levels: ``FABRICMON_DATABASE__DSN=postgresql://…``,
``FABRICMON_API__LISTEN=0.0.0.0:8080``; values are read as YAML scalars (numbers, booleans,
lists). ``${VAR}`` inside any string of the file is replaced by that environment variable.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from config.base import Section
from config.errors import ConfigError
from config.model import Config

ENV_PREFIX = "FABRICMON_"
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

Key = tuple[str | int, ...]


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Read, merge and validate the configuration; raise :class:`ConfigError` on any problem."""
    env = os.environ if env is None else env
    data: dict[str, Any] = {}
    lines: dict[Key, int] = {}
    where = "<defaults>"
    if path is not None:
        where = str(path)
        data, lines = _read_yaml(Path(path))
        data = _expand_env_refs(data, (), env, where, lines)
    from_env: dict[Key, str] = {}
    for name, key, value in _env_overrides(env):
        _set_path(data, key, value)
        from_env[key] = name
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, where, lines, from_env)) from None


def _read_yaml(path: Path) -> tuple[dict[str, Any], dict[Key, int]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.load(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}{line}: invalid YAML: {problem}") from None
    if data is None:
        return {}, {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: the top level must be a mapping of sections, got {type(data).__name__}")
    lines: dict[Key, int] = {}
    _index_lines(node, (), lines, path)
    return data, lines


def _index_lines(node: yaml.Node | None, key: Key, out: dict[Key, int], path: Path) -> None:
    if node is None:
        return
    out[key] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for k, v in node.value:
            name = str(k.value)
            if name in seen:
                raise ConfigError(f"{path}:{k.start_mark.line + 1}: {_dotted((*key, name))}: duplicate key")
            seen.add(name)
            out[(*key, name)] = k.start_mark.line + 1
            _index_lines(v, (*key, name), out, path)
            out[(*key, name)] = k.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index_lines(item, (*key, i), out, path)


def _expand_env_refs(value: Any, key: Key, env: Mapping[str, str], where: str, lines: dict[Key, int]) -> Any:
    if isinstance(value, dict):
        return {k: _expand_env_refs(v, (*key, k), env, where, lines) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand_env_refs(v, (*key, i), env, where, lines) for i, v in enumerate(value)]
    if isinstance(value, str) and "${" in value:

        def sub(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in env:
                raise ConfigError(
                    f"{_locate(where, lines, key)}{_dotted(key)}: environment variable ${{{name}}} is not set"
                )
            return env[name]

        return _ENV_REF.sub(sub, value)
    return value


def _env_overrides(env: Mapping[str, str]) -> list[tuple[str, Key, Any]]:
    found: list[tuple[str, Key, Any]] = []
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        parts = name[len(ENV_PREFIX) :].lower().split("__")
        if not all(parts):
            raise ConfigError(f"environment variable {name}: empty key part")
        try:
            value = yaml.safe_load(env[name]) if env[name] != "" else ""
        except yaml.YAMLError:
            value = env[name]
        # Secrets and addresses stay strings even when they look like numbers.
        if not isinstance(value, str | int | float | bool | list | dict) or isinstance(value, dict):
            value = env[name]
        found.append((name, tuple(parts), value))
    return found


def _set_path(data: dict[str, Any], key: Key, value: Any) -> None:
    node: Any = data
    for part in key[:-1]:
        nxt = node.get(part) if isinstance(node, dict) else None
        if not isinstance(nxt, dict):
            nxt = {}
            node[part] = nxt
        node = nxt
    node[key[-1]] = value


def _describe(exc: ValidationError, where: str, lines: dict[Key, int], from_env: dict[Key, str]) -> str:
    errors = exc.errors()
    first = errors[0]
    key: Key = tuple(first["loc"])
    # Pydantic reports union members and validators as extra loc parts; keep only real keys.
    key = tuple(p for p in key if isinstance(p, int) or not p.startswith(("function-", "tagged-union")))
    kind = first["type"]
    if kind == "extra_forbidden":
        message = _unknown(key)
    elif kind == "missing":
        message = "missing required key"
    else:
        message = first["msg"]
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    origin = next((f"environment {name}: " for k, name in from_env.items() if key[: len(k)] == k), None)
    return f"{origin or _locate(where, lines, key)}{_dotted(key) or '<top>'}: {message}{more}"


def _locate(where: str, lines: dict[Key, int], key: Key) -> str:
    probe = key
    while probe:
        if probe in lines:
            return f"{where}:{lines[probe]}: "
        probe = probe[:-1]
    return f"{where}: "


def _unknown(key: Key) -> str:
    """Why ``key`` is refused: a key the section no longer has (and what replaces it), or a typo."""
    model: type[BaseModel] | None = Config
    for part in key[:-1]:
        if model is None or isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        model = _model_of(field.annotation) if field is not None else None
    if model is None or not key or isinstance(key[-1], int):
        return "unknown key"
    removed = model.removed_keys.get(key[-1]) if issubclass(model, Section) else None
    if removed is not None:
        return f"removed key ({removed}): delete it"
    close = difflib.get_close_matches(key[-1], list(model.model_fields), n=1)
    return "unknown key" + (f" (did you mean {close[0]!r}?)" if close else "")


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def _dotted(key: Key) -> str:
    out = ""
    for part in key:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out

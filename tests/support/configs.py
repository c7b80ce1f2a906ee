"""The one way tests build a fabricmon :class:`Config`: a base (often the simulator's written
configuration) deep-merged with the sections a test sets, validated as a config file is."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from config.model import Config


def merged(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` laid on it; mappings merge key by key, anything else is replaced."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def config_data(base: Mapping[str, Any] | None = None, *, spool: Path | None = None, dsn: str | None = None,
                flush_s: float | None = 0.2, **sections: Any) -> dict[str, Any]:  # fmt: skip
    """The config as a dict: ``base`` + ``sections``; the writer spools into ``spool`` and flushes
    every ``flush_s`` (a test's rows are in the database within a fraction of a second)."""
    writer: dict[str, Any] = {}
    if spool is not None:
        writer["spool_dir"] = str(spool)
    if flush_s is not None:
        writer["flush_interval_s"] = flush_s
    database: dict[str, Any] = {"writer": writer} | ({"dsn": dsn} if dsn else {})
    return merged(merged(base or {}, {"database": database}), sections)


def config(base: Mapping[str, Any] | None = None, *, spool: Path | None = None, dsn: str | None = None,
           flush_s: float | None = 0.2, **sections: Any) -> Config:  # fmt: skip
    """:func:`config_data`, validated."""
    return Config.model_validate(config_data(base, spool=spool, dsn=dsn, flush_s=flush_s, **sections))

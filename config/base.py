"""The base every configuration section derives from: unknown keys are errors, not ignored."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import ClassVar

from pydantic import BaseModel, ConfigDict

HOSTPORT = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.{}-]+):(\d{1,5}|\{[a-z_]+\})$")


class Section(BaseModel):
    """A configuration section: typed, strict about unknown keys, immutable once loaded."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    #: Keys this section no longer has, each with what to tell a config file that still sets it
    #: (the loader reports "removed key (<note>): delete it" instead of "unknown key").
    removed_keys: ClassVar[Mapping[str, str]] = {}


def check_hostport(value: str) -> str:
    """Validate ``host:port`` (``[v6]:port`` too); placeholders such as ``{switch}`` are allowed."""
    match = HOSTPORT.match(value)
    if not match:
        raise ValueError(f"expected host:port, got {value!r}")
    port = match.group(2)
    if port.isdigit() and not 0 <= int(port) <= 65535:
        raise ValueError(f"port out of range in {value!r}")
    return value

"""The ``api`` configuration section (owned by the REST API)."""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator

from config.base import Section, check_hostport


class ApiConfig(Section):
    """Where the REST API listens and who may call it."""

    listen: str = "127.0.0.1:8080"
    #: Bearer tokens; when set, every /v1 route needs one of them.
    tokens: list[SecretStr] = []
    open_routes: list[str] = Field(default_factory=lambda: ["/healthz", "/readyz", "/metrics"])

    _check_listen = field_validator("listen")(staticmethod(check_hostport))

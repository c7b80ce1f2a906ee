"""Schemathesis against ``/openapi.json``, on a real server (127.0.0.1, a free port) over a seeded
database: no 5xx, every response conforms to the schema (status, content type, body, headers),
schema-invalid input is rejected with a 4xx, the declared bearer auth is enforced, and every
schema-valid request is accepted: every check schemathesis has (``--checks all``).

Accepted means a 2xx, or one of the operation's documented refusals: a rule about the data that
no schema can state (an unknown switch or job, a job's hosts outside the inventory, ``from``
not before ``to``), each listed in the operation's ``x-fabricmon-refusals`` with its status and
problem ``type``. :func:`accepts_schema_valid_requests` is schemathesis' own
``positive_data_acceptance`` with exactly those exceptions; a 4xx of any other type for a
request that matches the schema (``validation``, say: a bound the schema does not state) fails.

Bounded: a few dozen examples per operation, so the whole run takes well under a minute (it is
in the default test run, not marked slow). Generation is derandomized, so a run is
reproducible; deeper runs (``FABRICMON_SCHEMATHESIS_EXAMPLES=300``) can meet schemathesis' own
false positives of ``negative_data_rejection`` after shrinking (schemathesis issue 4332).
"""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import CheckContext, positive_data_acceptance
from schemathesis.config import SchemathesisConfig
from schemathesis.core.transport import Response
from schemathesis.openapi.checks import RejectedPositiveData

from api.app import create_app
from api.routes import ENDPOINTS
from api.routes.openapi import build
from config.model import Config
from store.pgserver import EmbeddedStore
from tests.support.api_lab import FABRIC, seeded_database, serve_in_thread

TOKEN = "schemathesis-token"
CONFIG = Config.model_validate({"api": {"tokens": [TOKEN]}})
#: Examples per operation; raise it for a deeper run (e.g. FABRICMON_SCHEMATHESIS_EXAMPLES=500).
MAX_EXAMPLES = int(os.environ.get("FABRICMON_SCHEMATHESIS_EXAMPLES", "25"))


@pytest.fixture(scope="module")
def base_url(pg_store: EmbeddedStore) -> Iterator[str]:
    with (
        seeded_database(pg_store) as seeded,
        serve_in_thread(lambda: create_app(CONFIG, FABRIC, dsn=seeded.dsn)) as url,
    ):
        yield url


# The document the app serves, built in-process at import (schemathesis' lazy fixture loader does not
# work with this pytest); test_the_served_document_is_this_one checks that the server serves it.
DOCUMENT = build(ENDPOINTS, auth=True, open_routes=CONFIG.api.open_routes)
# The token through schemathesis' own auth (the document's ``bearer`` scheme), not a header forced onto
# every request: a negative case that drops the Authorization header must reach the server without it.
schema = schemathesis.openapi.from_dict(
    DOCUMENT, config=SchemathesisConfig.from_dict({"auth": {"openapi": {"bearer": {"bearer": TOKEN}}}})
)
#: (method, path) -> the (status, problem type) pairs the operation documents as refusals.
REFUSALS = {
    (method.upper(), path): {(r["status"], r["type"]) for r in op.get("x-fabricmon-refusals", [])}
    for path, ops in DOCUMENT["paths"].items()
    for method, op in ops.items()
}


def _problem_type(response: Response) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return None
    return body.get("type") if isinstance(body, dict) else None


def accepts_schema_valid_requests(ctx: CheckContext, response: Response, case: Any) -> bool | None:
    """``positive_data_acceptance``, except for the operation's documented refusals."""
    if case.meta is not None and case.meta.generation.mode.is_positive and response.status_code == 401:
        raise AssertionError("a schema-valid request with the token was refused 401: is the token sent?")
    try:
        accepted: bool | None = positive_data_acceptance(ctx, response, case)
    except RejectedPositiveData:
        refusals = REFUSALS[(case.operation.method.upper(), case.operation.path)]
        if (response.status_code, _problem_type(response)) in refusals:
            return None
        raise
    return accepted


def test_every_refusal_is_documented_in_the_description() -> None:
    for (method, path), refusals in REFUSALS.items():
        op = DOCUMENT["paths"][path][method.lower()]
        for status, kind in refusals:
            assert kind.rsplit("/", 1)[-1] in op["description"], (method, path, kind)
            assert str(status) in op["responses"], (method, path, status)


def test_no_constraint_is_lost_on_the_way_to_the_document() -> None:
    """pydantic writes some constraints under its own names (``ge``, ``le``) when it cannot place
    them, and JSON Schema ignores unknown keywords: the server would enforce a bound the document
    does not state."""
    text = json.dumps(DOCUMENT)
    for keyword in ("ge", "gt", "le", "lt", "min_length", "max_length", "multiple_of"):
        assert f'"{keyword}":' not in text, keyword


def test_the_served_document_is_this_one(base_url: str) -> None:
    with urllib.request.urlopen(f"{base_url}/openapi.json", timeout=10) as resp:
        assert json.load(resp) == DOCUMENT


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)
def test_api_conforms_to_its_schema(case: Any, base_url: str) -> None:
    case.call_and_validate(
        base_url=base_url,
        excluded_checks=[positive_data_acceptance],
        additional_checks=[accepts_schema_valid_requests],
    )

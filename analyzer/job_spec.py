"""Training jobs: the one validation of a job (the ``jobs`` table is :mod:`store.jobs`).

A job is ``id``, ``hosts`` (server names), optional ``started_at`` and ``expected_days`` (SPEC §4).
It is validated once, by :class:`JobSpec` (a pydantic model), wherever it comes from: a scheduler
registering it (``POST /v1/jobs``, whose body is :class:`JobIn`, the same model with ``id``
required; the API publishes it in ``/openapi.json``) or a file given to ``fabricmon check --job``
(:func:`load_job_file` → :func:`job_from_dict`, ``id`` optional: ``preflight``). The rules:

* ``id``: 1-128 characters, letters, digits and ``. _ : @ + = -``, starting with a letter or digit
  (it is a URL path segment: ``/v1/jobs/{id}``);
* ``hosts``: 1-65,536 server names (printable, at most 200 characters each); repeats are dropped,
  first one kept;
* ``started_at``: an ISO 8601 date/time (a YAML timestamp or date in a file), naive meaning UTC;
* ``expected_days``: a number > 0 and at most 3650 (ten years).

Whether the hosts are servers of the inventory is the caller's rule, not a shape: the API refuses
unknown hosts (a job the fabric cannot place would always look healthy), a pre-flight reports
them.

Exception tree::

    JobError (FabricmonError, ValueError)   a job description that cannot be used
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, ValidationError

from fabric.errors import FabricmonError
from store.jobs import Job

#: A job id as a scheduler names it: usable in a URL path segment.
JobId = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@+=-]*$")]
#: A server name: printable, no control characters.
HostName = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]
MAX_HOSTS = 65_536
MAX_DAYS = 3650.0
#: The id of a job described without one (a pre-flight file).
PREFLIGHT_ID = "preflight"
#: Each field's rule, for the one-line errors of a job file.
RULES = {
    "id": "must be 1-128 letters, digits or . _ : @ + = -, starting with a letter or digit",
    "hosts": f"must be a non-empty list of server names (at most {MAX_HOSTS})",
    "started_at": "must be an ISO 8601 date/time",
    "expected_days": f"must be a number > 0 and <= {MAX_DAYS:g}",
}


class JobError(FabricmonError, ValueError):
    """A job description that cannot be used."""


def _start_time(value: Any) -> Any:
    """``started_at``: an aware datetime from an ISO 8601 string, a datetime or a date (UTC when naive)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(RULES["started_at"]) from None
    elif isinstance(value, date) and not isinstance(value, datetime):
        value = datetime.combine(value, time(), UTC)
    if not isinstance(value, datetime):  # a number is not a time here: the schema says string
        raise ValueError(RULES["started_at"])
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class JobSpec(BaseModel):
    """A job as a file describes it (``id`` optional)."""

    model_config = ConfigDict(extra="forbid")
    id: JobId | None = None
    hosts: list[HostName] = Field(min_length=1, max_length=MAX_HOSTS, description="server names from the inventory")
    started_at: Annotated[datetime | None, BeforeValidator(_start_time)] = Field(
        None, description="ISO 8601; naive means UTC"
    )
    expected_days: Annotated[float, Field(gt=0, le=MAX_DAYS, allow_inf_nan=False, strict=True)] | None = None

    def to_job(self) -> Job:
        """The :class:`Job` (hosts deduplicated, first one kept)."""
        return Job(self.id or PREFLIGHT_ID, tuple(dict.fromkeys(self.hosts)), self.started_at, self.expected_days)


class JobIn(JobSpec):
    """A training job as a scheduler registers it (``POST /v1/jobs``)."""

    id: JobId


def job_from_dict(data: Any, where: str = "job") -> Job:
    """A job from a mapping (a job file's content), or :class:`JobError` naming the first bad key."""
    if not isinstance(data, dict):
        raise JobError(f"{where}: expected a mapping with 'hosts'")
    unknown = sorted(str(k) for k in set(data) - set(JobSpec.model_fields))
    if unknown:
        raise JobError(f"{where}: unknown key(s) {', '.join(unknown)}")
    try:
        return JobSpec.model_validate(data).to_job()
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        key = str(first["loc"][0]) if first["loc"] else ""
        raise JobError(f"{where}: {key!r} {RULES.get(key, first['msg'])}") from None


def load_job_file(path: Path) -> Job:
    """A job from a YAML or JSON file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise JobError(f"{path}: cannot read job file: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise JobError(f"{path}: not UTF-8 text") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise JobError(f"{path}: not YAML/JSON: {str(exc).splitlines()[0]}") from None
    return job_from_dict(data, str(path))


__all__ = ["JobError", "JobIn", "JobSpec", "job_from_dict", "load_job_file"]

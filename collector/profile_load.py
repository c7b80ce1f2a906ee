"""Loading a gNMI profile: its YAML document checked (pydantic) and compiled into a :class:`Profile`.

The document's form is described in :mod:`collector.profiles`. What a leaf entry's ``field``
means (its :class:`Kind`), the units that scale it and the encodings are the tables below; a
document that breaks them raises :class:`ProfileError` naming where.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from collector.profiles import (
    LLDP_FIELDS,
    PFC_PRIORITIES,
    PROFILE_DIR,
    Elem,
    Family,
    Kind,
    LeafSpec,
    Profile,
    ProfileError,
    Subscription,
    format_path,
    parse_path,
)
from collector.records import COUNTER_FIELDS

#: What each field a leaf entry may name is.
_KIND_OF: dict[str, Kind] = {
    **dict.fromkeys(COUNTER_FIELDS, Kind.COUNTER),
    "pfc_rx": Kind.COUNTER,
    "pfc_tx": Kind.COUNTER,
    "pfc_rx_total": Kind.COUNTER,
    "pfc_tx_total": Kind.COUNTER,
    "last_clear_ns": Kind.TIMETICKS,
    "last_change_ns": Kind.TIMETICKS,
    "oper_up": Kind.STATUS,
    "speed_bps": Kind.SPEED,
    **dict.fromkeys(LLDP_FIELDS, Kind.TEXT),
}
_UNITS: dict[Kind, dict[str, int]] = {
    Kind.SPEED: {"bps": 1, "kbps": 10**3, "mbps": 10**6, "gbps": 10**9},
    Kind.TIMETICKS: {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9, "date-and-time": 1},
}
DATE_AND_TIME = "date-and-time"  # the unit of a TIMETICKS field sent as an RFC 3339 string
_ENCODINGS = {"json": 0, "proto": 2, "json_ietf": 4}  # gnmi_pb2.Encoding values


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _LeafDoc(_Doc):
    field: str
    unit: str | None = None
    values: dict[str, bool | int] | None = None


class _FamilyDoc(_Doc):
    name: str
    root: str
    leaves: dict[str, str | _LeafDoc] = Field(min_length=1)
    ignore: list[str] = []
    unknown_leaves: Literal["count", "ignore"] = "count"
    lldp: bool = False
    removed_on_delete: list[str] = []
    empty_is_delete: bool = False


class _SubscriptionDoc(_Doc):
    path: str
    mode: Literal["sample", "on_change"]
    target: str | None = None
    interval: Literal["counters", "dom", "fec", "thresholds"] = "counters"


class _OpticsDoc(_Doc):
    schema_: Literal["openconfig", "sonic"] = Field(alias="schema")
    subscriptions: list[_SubscriptionDoc] = Field(min_length=1)
    fec: Literal["subscribed", "counters"] = "subscribed"

    @model_validator(mode="after")
    def _fec_in_counters_is_sonic(self) -> _OpticsDoc:
        if self.fec == "counters" and self.schema_ != "sonic":
            raise ValueError("fec: counters reads SONiC's COUNTERS hash: it needs schema: sonic")
        return self


class _ProfileDoc(_Doc):
    name: str
    description: str = ""
    target: str = "{target}"
    origin: str = ""
    encoding: Literal["proto", "json_ietf", "json"] = "proto"
    subscriptions: list[_SubscriptionDoc] = Field(min_length=1)
    families: list[_FamilyDoc] = Field(min_length=1)
    optics: _OpticsDoc | None = None


def _compile_family(doc: _FamilyDoc, where: str) -> Family:
    root = parse_path(doc.root)
    binds = sum(n == "{port}" for n, _ in root) + sum(v == "{port}" for _, keys in root for _, v in keys)
    if binds != 1:
        raise ProfileError(f"{where}.root: {doc.root!r} must bind '{{port}}' exactly once")
    leaves: dict[str, LeafSpec] = {}
    var_of: dict[tuple[str, str], str] = {}
    for text, entry in doc.leaves.items():
        spec_doc = entry if isinstance(entry, _LeafDoc) else _LeafDoc(field=entry)
        kind, scale, values = _leaf_meaning(spec_doc, doc.lldp, f"{where}.leaves[{text!r}]")
        for path_text, prio in _expand_priority(text):
            elems = parse_path(path_text)
            _variables(elems, var_of)
            per_priority = spec_doc.field in ("pfc_rx", "pfc_tx")
            if per_priority and prio is None and "{priority}" not in path_text:
                raise ProfileError(f"{where}.leaves[{text!r}]: {spec_doc.field} needs a {{priority}} in its path")
            leaves[format_path(elems)] = LeafSpec(spec_doc.field, kind, scale, prio, values)
    ignore = [parse_path(t) for t in doc.ignore]
    for elems in ignore:
        _variables(elems, var_of)
    return Family(
        name=doc.name,
        root=root,
        leaves=leaves,
        ignore=frozenset(format_path(elems) for elems in ignore),
        var_of=var_of,
        unknown=doc.unknown_leaves,
        lldp=doc.lldp,
        removed_by=frozenset(format_path(parse_path(t)) for t in doc.removed_on_delete),
        empty_is_delete=doc.empty_is_delete,
    )


def _leaf_meaning(doc: _LeafDoc, lldp: bool, where: str) -> tuple[Kind, int, tuple[tuple[str, bool | int], ...]]:
    """A leaf entry's kind, unit scale and enumeration words, checked."""
    kind = _KIND_OF.get(doc.field)
    if kind is None:
        raise ProfileError(f"{where}: unknown field {doc.field!r}")
    if (kind is Kind.TEXT) != lldp:
        raise ProfileError(f"{where}: LLDP fields belong in an 'lldp: true' family only")
    units = _UNITS.get(kind, {})
    if kind is Kind.TIMETICKS and doc.unit == DATE_AND_TIME:
        kind = Kind.DATETIME
    elif doc.unit is not None and doc.unit not in units:
        raise ProfileError(f"{where}: unit {doc.unit!r} not one of {sorted(units)}")
    values: tuple[tuple[str, bool | int], ...] = ()
    if doc.values is not None:
        want = bool if kind is Kind.STATUS else int if kind is Kind.SPEED else None
        if want is None or any(type(v) is not want or v < 0 for v in doc.values.values()):
            raise ProfileError(f"{where}: 'values' maps words to true/false (oper_up) or numbers (speed_bps)")
        values = tuple((word.lower(), v) for word, v in doc.values.items())
    return kind, units.get(doc.unit or "", 1), values


def _variables(elems: Sequence[Elem], var_of: dict[tuple[str, str], str]) -> None:
    """Record the ``{name}`` key values of a leaf or ignore path (``{port}`` belongs to roots)."""
    for name, keys in elems:
        for key, value in keys:
            if value.startswith("{") and value.endswith("}") and value != "{port}":
                var_of[(name, key)] = value[1:-1]


def _expand_priority(text: str) -> list[tuple[str, int | None]]:
    """A ``{priority}`` inside an element name becomes 8 leaves; in a key value it stays a variable."""
    if "{priority}" not in text.replace("={priority}]", ""):
        return [(text, None)]
    return [(text.replace("{priority}", str(p)), p) for p in range(PFC_PRIORITIES)]


def compile_profile(data: object, where: str = "profile") -> Profile:
    """Validate and compile a profile document (the parsed YAML)."""
    try:
        doc = _ProfileDoc.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ProfileError(f"{where}: {loc}: {first['msg']}") from None
    try:
        families = tuple(_compile_family(f, f"{where}.families[{f.name}]") for f in doc.families)
        subs = tuple(Subscription(s.path, s.mode, s.target, s.interval) for s in doc.subscriptions)
        optics = () if doc.optics is None else doc.optics.subscriptions
        optics_subs = tuple(Subscription(s.path, s.mode, s.target, s.interval) for s in optics)
        if doc.optics is not None and doc.optics.fec == "counters" and not any(_whole_hash(s.path) for s in subs):
            raise ProfileError(
                f"{where}: optics.fec: counters keeps FEC from the counters' COUNTERS hashes, but no subscription "
                "asks for a whole hash (COUNTERS/Ethernet* or COUNTERS/<port>)"
            )
        for s in subs + optics_subs:
            parse_path(s.path)
    except ValueError as exc:
        if isinstance(exc, ProfileError):
            raise
        raise ProfileError(f"{where}: {exc}") from None
    list_keys: dict[str, tuple[str, ...]] = {}
    for fam in families:
        for name, keys in fam.root + tuple(e for text in (*fam.leaves, *fam.ignore) for e in parse_path(text)):
            if keys:  # the union over families: /interfaces/interface[name], /qos/.../interface[interface-id]
                list_keys[name] = tuple(dict.fromkeys(list_keys.get(name, ()) + tuple(k for k, _ in keys)))
    return Profile(
        name=doc.name,
        description=doc.description,
        target=doc.target,
        origin=doc.origin,
        encoding=_ENCODINGS[doc.encoding],
        subscriptions=subs,
        families=families,
        list_keys=list_keys,
        optics_schema=None if doc.optics is None else doc.optics.schema_,
        optics_subscriptions=optics_subs,
        fec_in_counters=doc.optics is not None and doc.optics.fec == "counters",
    )


def _whole_hash(path: str) -> bool:
    """Whether a SONiC path asks for whole COUNTERS hashes (every field of a port or of each)."""
    names = [n for n, _ in parse_path(path)]
    return len(names) == 2 and names[0] == "COUNTERS"


@functools.lru_cache(maxsize=64)
def load_profile(name: str) -> Profile:
    """A profile by name (``collector/profiles/<name>.yaml``) or by the path of a YAML file."""
    path = Path(name) if name.endswith((".yaml", ".yml")) or "/" in name else PROFILE_DIR / f"{name}.yaml"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        known = ", ".join(available_profiles())
        raise ProfileError(f"gNMI profile {name!r} not found (built-in: {known})") from None
    except (OSError, yaml.YAMLError) as exc:
        raise ProfileError(f"gNMI profile {path}: {exc}") from None
    return compile_profile(data, str(path))


def available_profiles() -> list[str]:
    """Names of the built-in profiles."""
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))

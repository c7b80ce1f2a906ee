"""Vendor differences as data: what to subscribe to on a NOS and what each leaf means.

A profile (``collector/profiles/<name>.yaml``, or a YAML file given by path) holds:

* ``target``: the gNMI prefix target convention. ``{target}`` is the target configured for
  the switch (default: the switch name, which is what the simulator expects); SONiC's
  telemetry service instead names a Redis database (``COUNTERS_DB``).
* ``encoding`` and ``subscriptions``: the request paths, each SAMPLE (counters, at
  ``collector.gnmi_interval_s``) or ON_CHANGE (oper-status, speed, LLDP). A subscription may
  name its own ``target``; the collector opens one Subscribe stream per distinct target. A path
  may name its origin as pygnmi's path syntax (which builds the requests) has it: the first
  element's module (``openconfig-interfaces:interfaces/...``: origin ``openconfig-interfaces``,
  element ``interfaces``; IOS XR), or a leading ``origin:/`` that keeps module-qualified element
  names (``rfc7951:/Cisco-IOS-XE-interfaces-oper:interfaces/...``; IOS XE). ``origin`` sets the
  request prefix's origin instead (gNMI spec §2.7: never both).
* ``optics`` (optional): the link-health paths (issue 26, SPEC §10.5), their own Subscribe
  streams decoded by :mod:`collector.gnmi_optics`: ``schema`` (``openconfig``: interface FEC
  leaves and ``/components`` transceivers, mapped by the device's ``state/transceiver``;
  ``sonic``: COUNTERS FEC fields and STATE_DB ``TRANSCEIVER_DOM_*`` tables) and
  ``subscriptions`` as above, each SAMPLE at the counter interval or, with ``interval: dom``, at
  ``collector.dom_interval_s`` (DOM moves slowly). ``fec: counters`` (``sonic`` only) takes the
  FEC fields from the COUNTERS hash the counters' stream already receives, at
  ``collector.fec_interval_s`` (:mod:`collector.gnmi_counters_fec`), instead of a subscription.
* ``families``: groups of leaves under one per-interface ``root``. The root template binds the
  port name, as a key value (``/interfaces/interface[name={port}]``) or as an element name
  (``COUNTERS/{port}``). ``leaves`` maps a path below the root to a :class:`PortReading` field
  (or, in an ``lldp`` family, an LLDP neighbour field); ``{priority}`` (PFC, 0..7) and
  ``{neighbor}`` (LLDP remote-table entry) may appear as key values, and ``{priority}`` also
  inside an element name (``SAI_PORT_STAT_PFC_{priority}_RX_PKTS``, expanded to 8 leaves).
  Any other ``{name}`` key value (``subinterface[index={index}]``) matches every value.
  ``ignore`` lists leaves that are served but not wanted; ``unknown_leaves: ignore`` drops any
  other leaf under the root silently (SONiC tables carry ~100 fields), while ``count`` (the
  default) reports it as an invalid, unknown path.
* A leaf's ``unit`` scales numbers (``mbps``, ``s``, ...); ``unit: date-and-time`` reads an
  RFC 3339 string (``last-change`` on SR Linux and IOS XE) as Unix ns. ``values`` maps a NOS's
  enumeration words to what they mean (``{up: true, testing: false}``, ``{100G: 100}`` in the
  leaf's unit), on top of the OpenConfig words every profile reads.
* Interface deletes: ``removed_on_delete`` lists paths below the root (``""``: the root itself)
  whose ``delete`` means the switch removed the interface (an optic pulled, a breakout
  changed); ``empty_is_delete`` reads a JSON member that is an empty object (``{"Ethernet0":
  {}}``) as a delete of that member's path, which is how SONiC's gNMI server reports a deleted
  Redis key.

Errors::

    FabricmonError
    └── ConfigError (ValueError)
        └── ProfileError          a profile that is missing, malformed or inconsistent
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Literal

from collector.records import COUNTER_FIELDS
from config.errors import ConfigError

PROFILE_DIR = Path(__file__).with_name("profiles")
PFC_PRIORITIES = 8

#: One path element: name (YANG module prefix stripped) and its keys, sorted by key name.
Elem = tuple[str, tuple[tuple[str, str], ...]]


class ProfileError(ConfigError):
    """A profile that cannot be loaded; the message names the file and the offending entry."""


class Kind(Enum):
    """How a leaf's value is read."""

    COUNTER = "counter"  # unsigned 64-bit count
    TIMETICKS = "timeticks"  # a Unix time, scaled to ns
    STATUS = "status"  # oper-status: "UP" → True, other states → False
    SPEED = "speed"  # an ETHERNET_SPEED identity, or a number scaled to bits/s
    TEXT = "text"  # an LLDP string
    DATETIME = "date-and-time"  # an RFC 3339 date-and-time string, as Unix ns
    IGNORE = "ignore"  # served, not wanted: skipped without counting


# --- the row every decoder fills: unsigned fields by index ------------------------------------

#: Row indexes of the unsigned fields; PFC per priority are PFC_RX + p and PFC_TX + p.
ROW_INDEX: dict[str, int] = {name: i for i, name in enumerate(COUNTER_FIELDS)}
LAST_CLEAR = ROW_INDEX["last_clear_ns"] = len(COUNTER_FIELDS)
LAST_CHANGE = ROW_INDEX["last_change_ns"] = LAST_CLEAR + 1
PFC_RX_TOTAL = ROW_INDEX["pfc_rx_total"] = LAST_CLEAR + 2
PFC_TX_TOTAL = ROW_INDEX["pfc_tx_total"] = LAST_CLEAR + 3
PFC_RX = LAST_CLEAR + 4
PFC_TX = PFC_RX + PFC_PRIORITIES
ROW_LEN = PFC_TX + PFC_PRIORITIES

LLDP_FIELDS = ("system_name", "port_id", "port_description", "chassis_id")


@dataclass(frozen=True, slots=True)
class Leaf:
    """A resolved leaf: what a value at one concrete path means."""

    kind: Kind
    index: int = -1  # row index (unsigned kinds)
    field: str = ""  # LLDP neighbour field (TEXT)
    neighbor: str = ""  # LLDP remote-table entry id
    scale: int = 1  # unit multiplier (SPEED, TIMETICKS)
    values: tuple[tuple[str, bool | int], ...] = ()  # NOS enumeration words (lower case) → value

    def word(self, value: object) -> object:
        """``value`` through the leaf's enumeration words (unchanged when it is not one of them)."""
        if self.values and isinstance(value, str):
            text = strip_module(value).strip().lower()
            for word, meant in self.values:
                if word == text:
                    return meant
        return value


IGNORED = Leaf(Kind.IGNORE)


@dataclass(frozen=True, slots=True)
class LeafSpec:
    """A leaf template's meaning; ``priority``/``neighbor`` fixed here or bound from the path."""

    field: str
    kind: Kind
    scale: int = 1
    priority: int | None = None
    values: tuple[tuple[str, bool | int], ...] = ()

    def bind(self, caps: Mapping[str, str]) -> Leaf | None:
        """The concrete leaf for captured key values (None: a priority out of range)."""
        if self.kind is Kind.TEXT:
            return Leaf(Kind.TEXT, field=self.field, neighbor=caps.get("neighbor", "1"))
        if self.field in ("pfc_rx", "pfc_tx"):
            prio = self.priority
            if prio is None:
                text = caps.get("priority", "")
                # ASCII digits only: '²'.isdigit() is true and int('²') raises (issue 28)
                prio = int(text) if len(text) <= 3 and text.isascii() and text.isdigit() else -1
            if not 0 <= prio < PFC_PRIORITIES:
                return None
            return Leaf(Kind.COUNTER, (PFC_RX if self.field == "pfc_rx" else PFC_TX) + prio)
        return Leaf(self.kind, ROW_INDEX.get(self.field, -1), scale=self.scale, values=self.values)


@dataclass(frozen=True, slots=True)
class Family:
    """Leaves under one per-interface root."""

    name: str
    root: tuple[Elem, ...]
    leaves: Mapping[str, LeafSpec]
    ignore: frozenset[str]
    var_of: Mapping[tuple[str, str], str]  # (element, key) → variable, for keys bound in leaves
    unknown: Literal["count", "ignore"]
    lldp: bool
    removed_by: frozenset[str] = frozenset()  # normalized paths below the root: their delete removes the port
    empty_is_delete: bool = False

    def match_root(self, elems: Sequence[Elem]) -> str | None:
        """The port name if ``elems`` starts with this root (None: no match, or no concrete port)."""
        port: str | None = None
        for (tname, tkeys), (name, keys) in zip(self.root, elems, strict=False):
            if tname == "{port}":
                if not name or "*" in name:
                    return None
                port = name
            elif tname != name:
                return None
            for key, tvalue in tkeys:
                value = _key(keys, key)
                if tvalue == "{port}":
                    if not value or value == "*":
                        return None
                    port = value
                elif value != tvalue:
                    return None
        return port

    def normalize(self, rest: Sequence[Elem]) -> tuple[str, dict[str, str]]:
        """The leaf-table key of a path below the root, and the variables it binds."""
        caps: dict[str, str] = {}
        parts: list[str] = []
        for name, keys in rest:
            text = name
            for key, value in keys:
                var = self.var_of.get((name, key))
                if var is not None:
                    caps[var] = value
                    value = "{" + var + "}"
                text += f"[{key}={value}]"
            parts.append(text)
        return "/".join(parts), caps


@dataclass(frozen=True, slots=True)
class Subscription:
    """One request path and its delivery mode; ``target`` None means the profile's target."""

    path: str
    mode: Literal["sample", "on_change"]
    target: str | None = None
    interval: Literal["counters", "dom", "fec", "thresholds"] = "counters"  # SAMPLE: which configured interval


@dataclass(frozen=True, slots=True)
class Profile:
    """A compiled profile: subscriptions, and the resolution of a concrete path to a leaf."""

    name: str
    description: str
    target: str
    origin: str
    encoding: int
    subscriptions: tuple[Subscription, ...]
    families: tuple[Family, ...]
    list_keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: Link health: the decoder's schema (None: the profile has no optics paths) and subscriptions.
    optics_schema: Literal["openconfig", "sonic"] | None = None
    optics_subscriptions: tuple[Subscription, ...] = ()
    #: FEC comes in the counters' own COUNTERS hash (SONiC), cut from it at fec_interval_s
    #: (:mod:`collector.gnmi_counters_fec`), not subscribed to.
    fec_in_counters: bool = False

    def match(self, elems: Sequence[Elem]) -> tuple[Family, str, Sequence[Elem]] | None:
        """The family whose root ``elems`` starts with, the bound port, and the elements below."""
        for fam in self.families:
            n = len(fam.root)
            if len(elems) >= n:
                port = fam.match_root(elems)
                if port is not None:
                    return fam, port, elems[n:]
        return None

    def resolve(self, elems: Sequence[Elem]) -> tuple[str | None, Leaf | None]:
        """(port, leaf) of a full path (prefix + update); leaf None: an unknown path."""
        found = self.match(elems)
        if found is None:
            return None, None
        fam, port, rest = found
        key, caps = fam.normalize(rest)
        spec = fam.leaves.get(key)
        if spec is not None:
            return port, spec.bind(caps)
        if key in fam.ignore or fam.unknown == "ignore":
            return port, IGNORED
        return port, None

    def covers_lldp(self, subs: Sequence[Subscription]) -> bool:
        """Whether any of ``subs`` reaches an LLDP family (its stream then owns the LLDP tables)."""
        roots = [fam.root for fam in self.families if fam.lldp]
        for sub in subs:
            names = [n for n, _ in parse_path(sub.path)]
            for root in roots:
                if all(t == "{port}" or "*" in n or n == t for n, (t, _) in zip(names, root, strict=False)):
                    return True
        return False

    def streams(self, configured: str | None, switch: str) -> dict[str, tuple[Subscription, ...]]:
        """Subscriptions grouped by resolved prefix target ("" = none): one Subscribe stream each."""
        return self._by_target(self.subscriptions, configured, switch)

    def optics_streams(self, configured: str | None, switch: str) -> dict[str, tuple[Subscription, ...]]:
        """The link-health subscriptions grouped by target, as :meth:`streams` (empty: none)."""
        return self._by_target(self.optics_subscriptions, configured, switch)

    def _by_target(
        self, subs: Sequence[Subscription], configured: str | None, switch: str
    ) -> dict[str, tuple[Subscription, ...]]:
        out: dict[str, list[Subscription]] = {}
        for sub in subs:
            template = self.target if sub.target is None else sub.target
            target = template.replace("{target}", configured or "").replace("{switch}", switch)
            out.setdefault(target, []).append(sub)
        return {t: tuple(s) for t, s in out.items()}


# --- paths --------------------------------------------------------------------------------------


def strip_module(name: str) -> str:
    """``openconfig-interfaces:interfaces`` → ``interfaces``."""
    return name.rpartition(":")[2] if ":" in name else name


def _key(keys: tuple[tuple[str, str], ...], name: str) -> str | None:
    for k, v in keys:
        if k == name:
            return v
    return None


_ELEM = re.compile(r"([^/\[\]]+)((?:\[[^=\]]+=[^\]]*\])*)")
_KEY = re.compile(r"\[([^=\]]+)=([^\]]*)\]")


def parse_path(text: str) -> tuple[Elem, ...]:
    """``/a/b[k=v]/c`` → elements (module prefixes stripped, keys sorted).

    A leading ``origin:/`` (``rfc7951:/Cisco-IOS-XE-interfaces-oper:interfaces/...``) names the
    path's origin, as in pygnmi's path syntax (which builds the request paths); it is no element.
    """
    elems: list[Elem] = []
    parts = _split(text)
    if parts and parts[0].endswith(":"):
        parts = parts[1:]
    for part in parts:
        match = _ELEM.fullmatch(part)
        if match is None:
            raise ValueError(f"malformed path element {part!r} in {text!r}")
        keys = tuple(sorted(_KEY.findall(match.group(2))))
        elems.append((strip_module(match.group(1)), keys))
    return tuple(elems)


def _split(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "/" and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p]


def format_path(elems: Sequence[Elem]) -> str:
    """Elements → ``a/b[k=v]`` (the normalized text used in leaf tables and messages)."""
    return "/".join(name + "".join(f"[{k}={v}]" for k, v in keys) for name, keys in elems)

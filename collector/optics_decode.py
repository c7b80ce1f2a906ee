"""Link-health leaves (FEC counters, transceiver DOM) → :class:`FecSample` / :class:`DomSample`.

Input is what the gNMI layer has already taken apart: leaves as (path elements, value), path
elements as in :mod:`collector.gnmi_values` (``(name, ((key, value), ...))``, module prefixes
stripped). Two schemas:

* OpenConfig (:class:`OpenConfigOptics`): ``/interfaces/interface[name=I]/ethernet/state/
  counters/{fec-corrected-blocks,fec-uncorrectable-blocks,in-symbol-error}``,
  ``.../ethernet/state/{pre-fec-ber,post-fec-ber}/instant``;
  ``/components/component[name=C]/transceiver/physical-channels/channel[index=N]/state/
  {input-power,output-power,laser-bias-current}/instant``, ``/components/component[name=C]/
  state/temperature/instant`` and ``.../transceiver/thresholds/threshold[severity=S]/state/
  {input-power-lower,laser-bias-current-upper}`` (S: ``WARNING``/``CRITICAL``, with or without
  the ``openconfig-alarm-types:`` prefix). The component of an interface is what the device
  says in ``/interfaces/interface[name=I]/state/transceiver`` (or ``.../physical-channel``'s
  parent, not read here): a component no interface names is **skipped and counted**
  (``unmapped``), never matched to an interface by its name.
* SONiC (:class:`SonicOptics`): COUNTERS_DB ``COUNTERS/<port>`` fields
  ``SAI_PORT_STAT_IF_IN_FEC_CODEWORD_ERRORS_S0..S15``, ``..._FEC_CORRECTABLE_FRAMES``,
  ``..._FEC_NOT_CORRECTABLE_FRAMES``, ``..._FEC_SYMBOL_ERRORS``; STATE_DB
  ``TRANSCEIVER_DOM_SENSOR/<port>`` (``rx1power``.. dBm, ``tx1power``.., ``tx1bias``.. mA,
  ``temperature``) and ``TRANSCEIVER_DOM_THRESHOLD/<port>`` (``rxpowerlowwarning``,
  ``rxpowerlowalarm``, ``txbiashighwarning``, ``txbiashighalarm``). The key is the port.

A module's lanes are summed up by the worst lane: the lowest rx and tx power, the highest bias.
Every value is bounded before use (:data:`BOUNDS`, counters by :func:`gnmi_values.to_uint`);
one out of its bounds, of the wrong type or not a number is skipped and counted through
``invalid(kind, n)`` with the kinds of :mod:`collector.gnmi_values`; SONiC's ``N/A`` is "not
reported", not invalid.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from collector.gnmi_values import MAX_DIGITS, MAX_TEXT, NOT_A_NUMBER, OUT_OF_RANGE, TOO_LONG, WRONG_TYPE, Bad, to_uint
from collector.profiles import Elem
from store.dom import DomSample
from store.fec import FecSample

#: A component no interface maps to: skipped, never guessed from names.
UNMAPPED = "unmapped"
#: (low, high) of each physical quantity; outside: skipped and counted as out_of_range.
BOUNDS: dict[str, tuple[float, float]] = {
    "dbm": (-60.0, 20.0),
    "ma": (0.0, 1000.0),
    "celsius": (-60.0, 200.0),
    "ber": (0.0, 1.0),
}
BINS = 16
#: The most transceivers whose thresholds one switch's decoder remembers.
MAX_COMPONENTS = 4096
Invalid = Callable[[str, int], None]
Leaves = Iterable[tuple[tuple[Elem, ...], Any]]


def bounded(value: Any, unit: str) -> float:
    """``value`` as a float inside ``unit``'s bounds; raises :class:`Bad` with the invalid kind."""
    t = value.__class__
    low, high = BOUNDS[unit]
    if t is float:
        v: float = value
        if low <= v <= high:
            return v  # the usual case (a double_val in bounds); NaN and infinities fail the test
    if t is bool or t not in (int, float, str):
        raise Bad(WRONG_TYPE)
    if t is str:
        if len(value) > MAX_TEXT:
            raise Bad(TOO_LONG)
        try:
            value = float(value.strip()[:64])
        except ValueError:
            raise Bad(NOT_A_NUMBER) from None
    v = float(value)
    if not math.isfinite(v):
        raise Bad(NOT_A_NUMBER)
    if not low <= v <= high:
        raise Bad(OUT_OF_RANGE)
    return v


@dataclass(slots=True)
class _Fec:
    corrected: int | None = None
    uncorrectable: int | None = None
    symbol_errors: int | None = None
    pre_fec_ber: float | None = None
    post_fec_ber: float | None = None
    bins: dict[int, int] = field(default_factory=dict)
    raw_ber: float | None = None  # Cumulus: the worst lane's raw (pre-FEC) BER

    def sample(self, at: datetime, switch: str, port: str) -> FecSample | None:
        bins = tuple(map(self.bins.__getitem__, range(BINS))) if len(self.bins) == BINS else None  # keys: 0..15
        corrected = self.corrected
        if corrected is None and bins is not None:  # Cumulus has no such counter: its histogram says
            corrected = sum(bins[1:])
        pre = self.pre_fec_ber if self.pre_fec_ber is not None else self.raw_ber
        s = FecSample(
            at, switch, port, corrected, self.uncorrectable, self.symbol_errors, pre, self.post_fec_ber, bins,
        )  # fmt: skip
        return s if any(v is not None for v in s[3:]) else None


@dataclass(slots=True)
class _Dom:
    rx: dict[str, float] = field(default_factory=dict)  # lane -> value
    tx: dict[str, float] = field(default_factory=dict)
    bias: dict[str, float] = field(default_factory=dict)
    temperature: float | None = None
    thresholds: dict[str, float] = field(default_factory=dict)

    def read(self) -> tuple[float | None, ...]:
        """The worst lanes (lowest rx and tx power, highest bias) and the temperature."""
        rx, tx, bias = self.rx.values(), self.tx.values(), self.bias.values()
        return (min(rx, default=None), min(tx, default=None), max(bias, default=None), self.temperature)

    def sample(self, at: datetime, switch: str, port: str, component: str) -> DomSample | None:
        return dom_sample(at, switch, port, component, self.read(), self.thresholds)


#: The module thresholds a :class:`DomSample` carries, in its order.
LIMIT_NAMES = ("rx_low_warning", "rx_low_critical", "bias_high_warning", "bias_high_critical")


def dom_sample(
    at: datetime, switch: str, port: str, component: str, read: Sequence[float | None], limits: Mapping[str, float]
) -> DomSample | None:
    """A transceiver's sample from its :meth:`_Dom.read` and thresholds; None when nothing was read."""
    if all(v is None for v in read):
        return None
    return DomSample(at, switch, port, component, *read, *(limits.get(name) for name in LIMIT_NAMES))


@dataclass(slots=True)
class OpticsBatch:
    """What one instant's leaves give: FEC per port, DOM per transceiver."""

    fec: list[FecSample] = field(default_factory=list)
    dom: list[DomSample] = field(default_factory=list)


class Tally:
    """Invalid values counted per kind while one batch is decoded."""

    def __init__(self) -> None:
        self.kinds: dict[str, int] = {}

    def bad(self, exc: Bad) -> None:
        self.kind(exc.args[0])

    def kind(self, kind: str, n: int = 1) -> None:
        self.kinds[kind] = self.kinds.get(kind, 0) + n

    def add(self, kinds: Mapping[str, int]) -> None:
        for kind, n in kinds.items():
            self.kind(kind, n)


def _count(invalid: Invalid, counts: dict[str, int]) -> None:
    for kind, n in counts.items():
        invalid(kind, n)


_OC_FEC_COUNTERS = {
    "fec-corrected-blocks": "corrected",
    "fec-uncorrectable-blocks": "uncorrectable",
    "in-symbol-error": "symbol_errors",
}
_OC_CHANNEL = {"input-power": ("rx", "dbm"), "output-power": ("tx", "dbm"), "laser-bias-current": ("bias", "ma")}
_OC_THRESHOLD = {
    ("input-power-lower", "WARNING"): ("rx_low_warning", "dbm"),
    ("input-power-lower", "CRITICAL"): ("rx_low_critical", "dbm"),
    ("laser-bias-current-upper", "WARNING"): ("bias_high_warning", "ma"),
    ("laser-bias-current-upper", "CRITICAL"): ("bias_high_critical", "ma"),
}


def _names(elems: tuple[Elem, ...]) -> tuple[str, ...]:
    return tuple([name for name, _ in elems])


def _key(elem: Elem, key: str) -> str | None:
    return dict(elem[1]).get(key)


#: What one OpenConfig leaf sets, resolved once per path (:meth:`OpenConfigOptics.resolve`):
#: ``(op, key, arg, unit)``, ``key`` the port or component, ``arg`` what the op needs.
Action = tuple[int, str, Any, str]
_MAP, _FEC, _BER, _BIN, _RAW_BER, _TEMP, _LANE, _LIMIT = range(8)


#: A plan's ops (:func:`plan_of`, ``collector._speedups.optics_slots``): a slot's code is ``slot * 8 + op``.
SKIP, UINT, SET, LOWEST, HIGHEST = range(5)
_FEC_SLOTS = {"corrected": 0, "uncorrectable": 1, "symbol_errors": 2, "pre_fec_ber": 3, "post_fec_ber": 4}
_LANE_SLOTS = {"rx": (0, LOWEST), "tx": (1, LOWEST), "bias": (2, HIGHEST)}
_NO_BOUNDS = (0.0, 0.0)


@dataclass(frozen=True, slots=True)
class Plan:
    """How the Notifications under one prefix are read into slots, when every leaf under it sets
    one port's FEC (slots: corrected, uncorrectable, symbol errors, pre- and post-FEC BER) or one
    transceiver's DOM (worst rx, tx, bias; temperature; the four thresholds of :data:`LIMIT_NAMES`)."""

    dom: bool
    key: str
    #: path bytes -> ``slot * 8 + op``
    layout: dict[bytes, int]
    #: per slot, the (low, high) its doubles must lie in
    bounds: tuple[tuple[float, float], ...]


def plan_of(acts: Mapping[bytes, Action | None]) -> Plan | None:
    """The :class:`Plan` of the leaves resolved under one prefix (path bytes -> action), or None
    when they are not all one port's FEC counters and BER or all one transceiver's DOM and
    thresholds (a Cumulus histogram, several keys: read leaf by leaf). The interface map's text
    leaf is left out of the layout: a Notification that carries it is read leaf by leaf."""
    used = [a for a in acts.values() if a is not None and a[0] != _MAP]
    if not used or len({a[1] for a in used}) != 1:
        return None
    dom = used[0][0] >= _TEMP
    bounds = [_NO_BOUNDS] * (8 if dom else 5)
    layout: dict[bytes, int] = {}
    for raw, act in acts.items():
        if act is None:
            layout[raw] = SKIP
            continue
        op, _, arg, unit = act
        if op == _MAP:
            continue  # a text leaf: its Notification is read leaf by leaf
        if op == _FEC:
            slot, how = _FEC_SLOTS[arg], UINT
        elif op == _BER:
            slot, how = _FEC_SLOTS[arg], SET
        elif op == _TEMP:
            slot, how = 3, SET
        elif op == _LANE:
            slot, how = _LANE_SLOTS[arg[0]]
        elif op == _LIMIT:
            slot, how = 4 + LIMIT_NAMES.index(arg), SET
        else:
            return None  # _MAP, _BIN, _RAW_BER
        if (op >= _TEMP) != dom:
            return None  # FEC and DOM leaves under one prefix
        layout[raw] = slot * 8 + how
        if how != UINT:
            bounds[slot] = BOUNDS[unit]
    return Plan(dom, used[0][1], layout, tuple(bounds))


class OpenConfigOptics:
    """One switch's OpenConfig link-health leaves; remembers the interface ↔ transceiver map.

    A leaf's path says what it sets (:meth:`resolve`, cacheable by the caller: the paths repeat
    every sample), and its value is then bounded and applied (:meth:`apply`)."""

    def __init__(self, switch: str, invalid: Invalid) -> None:
        self.switch = switch
        self.invalid = invalid
        #: component -> interface, as the device says (state/transceiver)
        self.port_of: dict[str, str] = {}
        #: component -> its module's thresholds as last read: they come at their own, slower
        #: interval (``collector.thresholds_interval_s``), and every DOM sample carries them
        self.limits: dict[str, dict[str, float]] = {}

    def decode(self, at: datetime, leaves: Leaves) -> OpticsBatch:
        """Samples at ``at`` from one instant's leaves (a whole notification, or several)."""
        fec: dict[str, _Fec] = {}
        dom: dict[str, _Dom] = {}
        tally = Tally()
        for elems, value in leaves:
            act = resolve(elems)
            if act is not None:
                try:
                    self.apply(act, value, fec, dom)
                except Bad as exc:
                    tally.bad(exc)
        return self.batch(at, fec, dom, tally)

    def batch(self, at: datetime, fec: dict[str, _Fec], dom: dict[str, _Dom], tally: Tally) -> OpticsBatch:
        """The samples of what :meth:`apply` gathered; the invalid values counted."""
        out = OpticsBatch()
        for port, f in fec.items():
            if (s := f.sample(at, self.switch, port)) is not None:
                out.fec.append(s)
        for component, d in dom.items():
            if (ds := self._dom(at, component, d.read(), d.thresholds, tally)) is not None:
                out.dom.append(ds)
        _count(self.invalid, tally.kinds)
        return out

    def planned(self, at: datetime, plan: Plan, values: Sequence[Any]) -> FecSample | DomSample | None:
        """The sample of one Notification read into ``plan``'s slots (:func:`plan_of`); its
        values are in bounds already (anything else was not read this way)."""
        if not plan.dom:  # corrected, uncorrectable, symbol errors, pre- and post-FEC BER
            return None if values.count(None) == len(values) else FecSample(at, self.switch, plan.key, *values)
        read, component = values[:4], plan.key
        mapped = self.port_of.get(component)
        if mapped is not None and values[4:].count(None) == len(LIMIT_NAMES):  # the common case: readings alone
            if read.count(None) == len(read):
                return None
            known = self.limits.get(component) or {}
            return DomSample(at, self.switch, mapped, component, *read, *map(known.get, LIMIT_NAMES))
        limits = {name: v for name, v in zip(LIMIT_NAMES, values[4:], strict=True) if v is not None}
        tally = Tally()
        ds = self._dom(at, component, read, limits, tally)
        _count(self.invalid, tally.kinds)
        return ds

    def _dom(
        self,
        at: datetime,
        component: str,
        read: Sequence[float | None],
        thresholds: dict[str, float],
        tally: Tally,
    ) -> DomSample | None:
        """A transceiver's sample from its ``read`` (worst rx, tx, bias; temperature) and the
        thresholds this instant brought; a component no interface maps to counted as unmapped."""
        mapped = self.port_of.get(component)
        if mapped is None:
            if any(v is not None for v in read[:3]) or thresholds:  # a temperature alone: a fan, a PSU, the chassis
                tally.kind(UNMAPPED)
            return None
        known = self.limits.get(component)
        if thresholds and (known is not None or len(self.limits) < MAX_COMPONENTS):
            known = self.limits[component] = {**(known or {}), **thresholds}
        return dom_sample(at, self.switch, mapped, component, read, known or thresholds)

    def apply(self, act: Action, value: Any, fec: dict[str, _Fec], dom: dict[str, _Dom]) -> None:
        """One leaf's value where its action says; raises :class:`Bad` when the value is invalid."""
        op, key, arg, unit = act
        if op == _MAP:
            if not isinstance(value, str) or not value or len(value) > MAX_TEXT:
                raise Bad(WRONG_TYPE)
            self.port_of[value] = key
        elif op >= _TEMP:
            d = dom.get(key)
            if d is None:
                d = dom[key] = _Dom()
            if op == _LANE:
                getattr(d, arg[0])[arg[1]] = bounded(value, unit)
            elif op == _LIMIT:
                d.thresholds[arg] = bounded(value, unit)
            else:
                d.temperature = bounded(value, unit)
        else:
            f = fec.get(key)
            if f is None:
                f = fec[key] = _Fec()
            if op == _FEC:
                setattr(f, arg, to_uint(value))
            elif op == _BER:
                setattr(f, arg, bounded(value, unit))
            elif op == _BIN:
                f.bins[arg] = to_uint(value)
            else:  # _RAW_BER: the worst lane's
                ber = bounded(value, unit)
                f.raw_ber = ber if f.raw_ber is None else max(f.raw_ber, ber)


def resolve(elems: tuple[Elem, ...]) -> Action | None:
    """What the OpenConfig (or Cumulus ``phy``) leaf at ``elems`` sets; None: nothing read here."""
    names = _names(elems)
    if len(names) >= 3 and names[:2] == ("interfaces", "interface"):
        port = _key(elems[1], "name")
        if port is None:
            return None
        rest = names[2:]
        if rest[0] == "phy":
            return _cumulus_phy(port, elems[2:], rest)
        if rest == ("state", "transceiver"):
            return (_MAP, port, None, "")
        if rest[:3] == ("ethernet", "state", "counters") and len(rest) == 4 and rest[3] in _OC_FEC_COUNTERS:
            return (_FEC, port, _OC_FEC_COUNTERS[rest[3]], "")
        if rest in _OC_BER:
            return (_BER, port, rest[2].replace("-", "_"), "ber")
    elif len(names) >= 4 and names[:2] == ("components", "component"):
        component = _key(elems[1], "name")
        if component is not None:
            return _component(component, elems, names[2:])
    return None


_OC_BER = (("ethernet", "state", "pre-fec-ber", "instant"), ("ethernet", "state", "post-fec-ber", "instant"))

#: Cumulus Linux 5.15's ``/interfaces/interface[name]/phy/...`` (NVIDIA's own, not OpenConfig).
_CUMULUS_COUNTERS = {
    ("phy", "fec", "state", "rs-fec-uncorrectable-blocks"): "uncorrectable",
    ("phy", "state", "symbol-errors"): "symbol_errors",
}
_CUMULUS_BIN = ("phy", "histograms", "state", "rs-num-corr-err", "count")
_CUMULUS_RAW_BER = ("phy", "channels", "channel", "ber", "state", "raw-ber")
_CUMULUS_EFFECTIVE_BER = ("phy", "ber", "state", "effective-ber")


def _cumulus_phy(port: str, elems: tuple[Elem, ...], rest: tuple[str, ...]) -> Action | None:
    """Cumulus's FEC leaves: uncorrectable blocks, symbol errors, the effective (post-FEC) BER, each
    lane's raw (pre-FEC) BER, and the histogram of codewords by corrected symbol errors
    (``rs-num-corr-err[upper-boundary=k]/count``: bin k as SONiC's S<k> where k is 0..15; other
    boundaries are not that histogram and are passed over). Other ``phy`` leaves are not read."""
    field_name = _CUMULUS_COUNTERS.get(rest)
    if field_name is not None:
        return (_FEC, port, field_name, "")
    if rest == _CUMULUS_BIN:
        bound = _key(elems[3], "upper-boundary") or ""
        if bound.isascii() and bound.isdigit() and len(bound) <= 2 and int(bound) < BINS:
            return (_BIN, port, int(bound), "")
    elif rest == _CUMULUS_RAW_BER:
        return (_RAW_BER, port, None, "ber")
    elif rest == _CUMULUS_EFFECTIVE_BER:
        return (_BER, port, "post_fec_ber", "ber")
    return None


def _component(component: str, elems: tuple[Elem, ...], rest: tuple[str, ...]) -> Action | None:
    if rest == ("state", "temperature", "instant"):
        return (_TEMP, component, None, "celsius")
    if rest[:3] == ("transceiver", "physical-channels", "channel") and len(rest) == 6:
        lane = _key(elems[4], "index") or "0"
        found = _OC_CHANNEL.get(rest[4])
        if found is not None and rest[3] == "state" and rest[5] == "instant":
            return (_LANE, component, (found[0], lane), found[1])
    elif rest[:2] == ("transceiver", "thresholds") and len(rest) == 5 and rest[3] == "state":
        severity = (_key(elems[4], "severity") or "").rpartition(":")[2]
        th = _OC_THRESHOLD.get((rest[4], severity))
        if th is not None:
            return (_LIMIT, component, th[0], th[1])
    return None


_SAI_FEC = "SAI_PORT_STAT_IF_IN_FEC_"
_SAI_BIN = "SAI_PORT_STAT_IF_IN_FEC_CODEWORD_ERRORS_S"
_SONIC_FEC = {
    "SAI_PORT_STAT_IF_IN_FEC_CORRECTABLE_FRAMES": "corrected",
    "SAI_PORT_STAT_IF_IN_FEC_NOT_CORRECTABLE_FRAMES": "uncorrectable",
    "SAI_PORT_STAT_IF_IN_FEC_SYMBOL_ERRORS": "symbol_errors",
}
_SONIC_THRESHOLDS = {
    "rxpowerlowwarning": ("rx_low_warning", "dbm"),
    "rxpowerlowalarm": ("rx_low_critical", "dbm"),
    "txbiashighwarning": ("bias_high_warning", "ma"),
    "txbiashighalarm": ("bias_high_critical", "ma"),
}
_NOT_REPORTED = frozenset({"N/A", "n/a", "", "None"})


#: The FEC fields of a COUNTERS hash: the attribute each sets, or its bin's index.
_SONIC_FEC_FIELDS: dict[str, str | int] = {**_SONIC_FEC, **{f"{_SAI_BIN}{k}": k for k in range(BINS)}}


#: The fields sonic-gnmi answers for ``COUNTERS/<port>/SAI_PORT_STAT_IF_IN_FEC_*``: bins S0..S15,
#: then the three counters, in :attr:`_Fec` order. A hash of exactly these takes the fast path.
_SONIC_FEC_ORDER = (*(f"{_SAI_BIN}{k}" for k in range(BINS)), *_SONIC_FEC)
_SONIC_FEC_NAMES = frozenset(_SONIC_FEC_ORDER)
#: Those field names, in that order (what a whole COUNTERS hash is searched for:
#: :mod:`collector.gnmi_counters_fec`).
SONIC_FEC_NAMES: tuple[str, ...] = _SONIC_FEC_ORDER


def _plain_uints(values: list[Any]) -> list[int] | None:
    """``values`` as ints when every one is a plain decimal text below 10^19 (what sonic-gnmi
    sends: Redis hash fields); None when any is not (each is then read the careful way)."""
    try:
        text = "".join(values)
    except TypeError:  # not all text
        return None
    if not (text.isascii() and text.isdigit()) or min(map(len, values)) == 0 or max(map(len, values)) >= MAX_DIGITS:
        return None
    return list(map(int, values))


def _plain_fec_ints(fields: Mapping[str, Any]) -> list[int] | None:
    """The FEC fields of a COUNTERS hash in :data:`SONIC_FEC_NAMES` order, as ints, when all are
    there as plain decimal texts; None when one is missing or not plain."""
    try:
        return _plain_uints([fields[name] for name in _SONIC_FEC_ORDER])
    except KeyError:
        return None


def sonic_fec_plain(at: datetime, switch: str, port: str, fields: Mapping[str, Any]) -> FecSample | None:
    """The FEC sample of a COUNTERS hash whose FEC fields (:data:`SONIC_FEC_NAMES`) are all there
    as plain decimal texts, as orchagent writes them (its other fields are not read); None when one
    is missing or not plain: the hash is then read the careful way (:class:`SonicOptics`), which
    counts what is wrong. The same sample that way would give, without building it field by field."""
    if (ints := _plain_fec_ints(fields)) is None:
        return None
    return FecSample(at, switch, port, ints[BINS], ints[BINS + 1], ints[BINS + 2], None, None, tuple(ints[:BINS]))


def _sonic_fec(fields: Mapping[str, Any], tally: Tally) -> _Fec:
    f = _Fec()
    if fields.keys() == _SONIC_FEC_NAMES and (ints := _plain_fec_ints(fields)) is not None:
        f.bins = dict(enumerate(ints[:BINS]))
        f.corrected, f.uncorrectable, f.symbol_errors = ints[BINS:]
        return f
    for name, value in fields.items():
        slot = _SONIC_FEC_FIELDS.get(name)
        if slot is None:
            if not name.startswith(_SAI_BIN):
                continue  # not FEC
            suffix = name[len(_SAI_BIN) :]  # a bin named with leading zeros ("S07")
            if not (suffix.isascii() and suffix.isdigit() and int(suffix[:3]) < BINS):
                continue
            slot = int(suffix)
        try:
            if isinstance(slot, int):
                f.bins[slot] = to_uint(value)
            else:
                setattr(f, slot, to_uint(value))
        except Bad as exc:
            tally.bad(exc)
    return f


#: TRANSCEIVER_DOM_SENSOR field -> (which lanes, lane, unit) or None, as :func:`_lane_of` finds
#: it; the names repeat every sample (bounded: the names come from the switch).
_LANES: dict[str, tuple[str, str, str] | None] = {}
_MAX_LANE_NAMES = 4096


def _lane_of(name: str) -> tuple[str, str, str] | None:
    for prefix, suffix, which, unit in (("rx", "power", "rx", "dbm"), ("tx", "power", "tx", "dbm"),
                                        ("tx", "bias", "bias", "ma")):  # fmt: skip
        if name.startswith(prefix) and name.endswith(suffix):
            lane = name[len(prefix) : -len(suffix)]
            if lane.isdigit() and len(lane) <= 2:
                return which, lane, unit
    return None


def _sonic_lane(name: str, d: _Dom) -> tuple[dict[str, float], str, str] | None:
    """(lanes, lane, unit) of a TRANSCEIVER_DOM_SENSOR field (``rx3power``, ``tx1bias``)."""
    try:
        found = _LANES[name]
    except KeyError:
        found = _lane_of(name)
        if len(_LANES) < _MAX_LANE_NAMES:
            _LANES[name] = found
    if found is None:
        return None
    which, lane, unit = found
    return (d.rx if which == "rx" else d.tx if which == "tx" else d.bias), lane, unit


def _unreported(value: Any) -> bool:
    """A field SONiC left unset (xcvrd writes ``N/A`` for what the module does not report)."""
    return value.__class__ is str and value in _NOT_REPORTED


def _sonic_dom(sensor: Mapping[str, Any], limits: Mapping[str, Any], tally: Tally) -> _Dom:
    d = _Dom()
    for name, value in sensor.items():
        if _unreported(value):
            continue
        try:
            if name == "temperature":
                d.temperature = bounded(value, "celsius")
            elif (found := _sonic_lane(name, d)) is not None:
                lanes, lane, unit = found
                lanes[lane] = bounded(value, unit)
        except Bad as exc:
            tally.bad(exc)
    d.thresholds, bad = sonic_limits(limits)
    tally.add(bad)
    return d


def sonic_limits(limits: Mapping[str, Any]) -> tuple[dict[str, float], dict[str, int]]:
    """A TRANSCEIVER_DOM_THRESHOLD hash's thresholds (:data:`LIMIT_NAMES`) and its invalid
    values' kinds, counted."""
    out: dict[str, float] = {}
    tally = Tally()
    for name, value in limits.items():
        th = _SONIC_THRESHOLDS.get(name)
        if th is None or _unreported(value):
            continue
        try:
            out[th[0]] = _limit(value, th[1])
        except Bad as exc:
            tally.bad(exc)
    return out, tally.kinds


#: What a TRANSCEIVER_DOM_SENSOR hash's reading takes of it, per field names as they come:
#: (field, slot of :meth:`_Dom.read`, unit) for the temperature and each lane's rx, tx and bias.
SensorPlan = tuple[tuple[str, int, str], ...]
_SENSOR_PLANS: dict[tuple[str, ...], SensorPlan] = {}
_MAX_SENSOR_PLANS = 1024
_LANE_SLOT = {"rx": 0, "tx": 1, "bias": 2}


def _sensor_plan(names: tuple[str, ...]) -> SensorPlan:
    plan: list[tuple[str, int, str]] = []
    for name in names:
        if name == "temperature":
            plan.append((name, 3, "celsius"))
        elif (found := _lane_of(name)) is not None:
            plan.append((name, _LANE_SLOT[found[0]], found[2]))
    return tuple(plan)


def sonic_sensor(sensor: dict[str, Any]) -> tuple[tuple[float | None, ...], dict[str, int]] | None:
    """One TRANSCEIVER_DOM_SENSOR hash read as :func:`_sonic_dom` reads it: :meth:`_Dom.read`'s
    worst lanes and temperature, and its invalid values' kinds, counted; by a plan made once per
    set of field names (a module's names repeat every sample). None when a field name is too long
    or a value it reads is not text: the hash is then read the careful way, which counts what is
    wrong."""
    names = tuple(sensor)
    plan = _SENSOR_PLANS.get(names)
    if plan is None:
        if max(map(len, names), default=0) > MAX_TEXT:
            return None
        plan = _sensor_plan(names)
        if len(_SENSOR_PLANS) >= _MAX_SENSOR_PLANS:
            _SENSOR_PLANS.clear()
        _SENSOR_PLANS[names] = plan
    worst: list[float | None] = [None, None, None, None]
    tally = Tally()
    for name, slot, unit in plan:
        value = sensor[name]
        if value.__class__ is not str:
            return None
        if value in _NOT_REPORTED:
            continue
        try:
            v = bounded(value, unit)
        except Bad as exc:
            tally.bad(exc)
            continue
        now = worst[slot]
        if now is None or slot == 3 or (v > now if slot == 2 else v < now):
            worst[slot] = v
    return tuple(worst), tally.kinds


#: (unit, text) -> its bounded value, or the kind it is invalid as: a module's thresholds are read
#: again with every DOM sample (each minute), and their texts repeat across ports and switches.
_LIMIT_TEXTS: dict[tuple[str, str], float | str] = {}
_MAX_LIMIT_TEXTS = 4096


def _limit(value: Any, unit: str) -> float:
    """:func:`bounded`, a text's answer remembered (bounded: the texts are the switch's)."""
    if value.__class__ is not str:
        return bounded(value, unit)
    key = (unit, value)
    found = _LIMIT_TEXTS.get(key)
    if found is None:
        try:
            found = bounded(value, unit)
        except Bad as exc:
            found = str(exc.args[0])
        if len(_LIMIT_TEXTS) >= _MAX_LIMIT_TEXTS:
            _LIMIT_TEXTS.clear()
        _LIMIT_TEXTS[key] = found
    if isinstance(found, str):
        raise Bad(found)
    return found


class SonicOptics:
    """One SONiC switch's FEC fields (COUNTERS) and DOM tables, keyed by port."""

    def __init__(self, switch: str, invalid: Invalid) -> None:
        self.switch = switch
        self.invalid = invalid

    def decode(
        self,
        at: datetime,
        counters: Mapping[str, Mapping[str, Any]] | None = None,
        dom: Mapping[str, Mapping[str, Any]] | None = None,
        thresholds: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> OpticsBatch:
        """Samples from ``COUNTERS``, ``TRANSCEIVER_DOM_SENSOR`` and ``..._THRESHOLD`` hashes per port."""
        counters, dom, thresholds = counters or {}, dom or {}, thresholds or {}
        tally = Tally()
        out = OpticsBatch()
        for port, fields in counters.items():
            if (s := _sonic_fec(fields, tally).sample(at, self.switch, port)) is not None:
                out.fec.append(s)
        for port in sorted(set(dom) | set(thresholds)):
            d = _sonic_dom(dom.get(port, {}), thresholds.get(port, {}), tally)
            if (ds := d.sample(at, self.switch, port, port)) is not None:
                out.dom.append(ds)
        _count(self.invalid, tally.kinds)
        return out

"""The link-health leaves a simulated switch serves, per NOS shape (issue 26, SPEC §10.5).

:func:`openconfig_leaves`: the OpenConfig leaves of one port's transceiver and FEC as
(path elements, value) pairs, path elements as the collector's decoders take them
(``(name, ((key, value), ...))``): ``/interfaces/interface[name=I]/state/transceiver`` names the
component, ``/components/component[name=C]/transceiver/physical-channels/channel[index=1]/state/
{input-power,output-power,laser-bias-current}/instant``, ``.../state/temperature/instant``,
``.../transceiver/thresholds/threshold[severity=openconfig-alarm-types:WARNING|CRITICAL]/state/
{input-power-lower,laser-bias-current-upper}``, ``/interfaces/interface[name=I]/ethernet/state/
counters/{fec-corrected-blocks,fec-uncorrectable-blocks,in-symbol-error}`` and
``.../ethernet/state/{pre-fec-ber,post-fec-ber}/instant``.

:func:`sonic_tables`: SONiC's hashes as sonic-gnmi serves them (values are strings): the FEC
fields of ``COUNTERS/<port>``, ``TRANSCEIVER_DOM_SENSOR/<port>`` and
``TRANSCEIVER_DOM_THRESHOLD/<port>`` (STATE_DB).

Served over gNMI (the families ``OPTICS_*`` and ``SONIC_FEC``/``SONIC_DOM*`` of
:class:`simulator.gnmi_paths.Family`, rendered from :meth:`FabricState.transceivers` readings,
not from the port rows):

* every OpenConfig-speaking shape (openconfig, cumulus, eos, xr, and a SONiC switch asked by its
  own name) answers the leaves above through :func:`select_optics` and :class:`OpticsRenderer`:
  one Notification per interface (prefix ``/interfaces/interface[name=I]``) and one per
  transceiver component (prefix ``/components/component[name=C]``), relative leaves. Counters
  are ``uint_val`` (JSON_IETF: a decimal string), measurements ``double_val`` (JSON_IETF: a
  decimal string, as RFC 7951 writes decimal64), the component name a string. EOS cuts the
  interface leaves per container as it does the others (``.../state``: ``transceiver``;
  ``.../ethernet/state``: ``counters/fec-*``, ``pre-fec-ber/instant``); XR's JSON containers
  are not applied to these families (a simplification: the collector reads both forms);
* SONiC's DB targets (:class:`SonicOpticsRenderer`): ``COUNTERS_DB`` answers the FEC fields
  when a path names them (``COUNTERS/Ethernet*/SAI_PORT_STAT_IF_IN_FEC_*``, a glob over ports
  as one Update ``{"<port>": {...}}``); a whole-hash ``COUNTERS/Ethernet*`` carries them too,
  after its other fields (:func:`sonic_fec_texts`; a real switch's hash has them, and ~80
  more). ``STATE_DB`` answers ``TRANSCEIVER_DOM_SENSOR`` and ``TRANSCEIVER_DOM_THRESHOLD``, the
  table's own path, as sonic-gnmi does (``tableData2Msi``: "if only table name provided [...],
  find all keys in the table", rendered into one JSON value): ONE Update at the table's path,
  ``{"<port>": {"rx1power": "-2.1", ...}, ...}``; ``<TABLE>/<port>`` with that port's hash, and
  ``<TABLE>/<port>/<field>`` with a ``string_val``. Values are strings.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Sequence
from typing import Any

from simulator.gnmi_paths import Elem as PElem
from simulator.gnmi_paths import Family, Kind, Leaf, Selection, match_template, parse_xpath
from simulator.gnmi_wire import Encoding, Group, Layout, json_ietf, path_bytes, prefix_field, string_val, update_field
from simulator.optics import BINS, OpticReading
from wire.protobuf import U64_MAX, varint

Elem = tuple[str, tuple[tuple[str, str], ...]]
_ALARM = "openconfig-alarm-types:"


def _e(elem: str, **keys: str) -> Elem:
    return (elem, tuple(sorted(keys.items())))


def openconfig_leaves(r: OpticReading) -> list[tuple[tuple[Elem, ...], Any]]:
    """One port's OpenConfig link-health leaves."""
    iface = (_e("interfaces"), _e("interface", name=r.port))
    comp = (_e("components"), _e("component", name=r.component))
    chan = (*comp, _e("transceiver"), _e("physical-channels"), _e("channel", index="1"), _e("state"))
    eth = (*iface, _e("ethernet"), _e("state"))
    out: list[tuple[tuple[Elem, ...], Any]] = [
        ((*iface, _e("state"), _e("transceiver")), r.component),
        ((*chan, _e("input-power"), _e("instant")), r.rx_power_dbm),
        ((*chan, _e("output-power"), _e("instant")), r.tx_power_dbm),
        ((*chan, _e("laser-bias-current"), _e("instant")), r.laser_bias_ma),
        ((*comp, _e("state"), _e("temperature"), _e("instant")), r.temperature_c),
        ((*eth, _e("counters"), _e("fec-corrected-blocks")), r.fec_corrected),
        ((*eth, _e("counters"), _e("fec-uncorrectable-blocks")), r.fec_uncorrectable),
        ((*eth, _e("counters"), _e("in-symbol-error")), r.symbol_errors),
        ((*eth, _e("pre-fec-ber"), _e("instant")), r.pre_fec_ber),
        ((*eth, _e("post-fec-ber"), _e("instant")), r.post_fec_ber),
    ]
    t = r.thresholds
    if t is not None:
        for severity, rx, bias in (
            ("WARNING", t.rx_low_warning_dbm, t.bias_high_warning_ma),
            ("CRITICAL", t.rx_low_critical_dbm, t.bias_high_critical_ma),
        ):
            th = (*comp, _e("transceiver"), _e("thresholds"), _e("threshold", severity=_ALARM + severity), _e("state"))
            out.append(((*th, _e("input-power-lower")), rx))
            out.append(((*th, _e("laser-bias-current-upper")), bias))
    return out


def sonic_tables(readings: list[OpticReading]) -> tuple[dict[str, dict[str, str]], ...]:
    """(COUNTERS FEC fields, TRANSCEIVER_DOM_SENSOR, TRANSCEIVER_DOM_THRESHOLD), keyed by port."""
    counters: dict[str, dict[str, str]] = {}
    dom: dict[str, dict[str, str]] = {}
    limits: dict[str, dict[str, str]] = {}
    for r in readings:
        fields = {f"SAI_PORT_STAT_IF_IN_FEC_CODEWORD_ERRORS_S{i}": str(n) for i, n in enumerate(r.fec_bins)}
        fields["SAI_PORT_STAT_IF_IN_FEC_CORRECTABLE_FRAMES"] = str(r.fec_corrected)
        fields["SAI_PORT_STAT_IF_IN_FEC_NOT_CORRECTABLE_FRAMES"] = str(r.fec_uncorrectable)
        fields["SAI_PORT_STAT_IF_IN_FEC_SYMBOL_ERRORS"] = str(r.symbol_errors)
        counters[r.port] = fields
        dom[r.port] = {
            "rx1power": f"{r.rx_power_dbm:.4f}", "tx1power": f"{r.tx_power_dbm:.4f}",
            "tx1bias": f"{r.laser_bias_ma:.4f}", "temperature": f"{r.temperature_c:.4f}", "voltage": "3.3",
        }  # fmt: skip
        if r.thresholds is not None:
            t = r.thresholds
            limits[r.port] = {
                "rxpowerlowwarning": f"{t.rx_low_warning_dbm:.4f}",
                "rxpowerlowalarm": f"{t.rx_low_critical_dbm:.4f}",
                "txbiashighwarning": f"{t.bias_high_warning_ma:.4f}",
                "txbiashighalarm": f"{t.bias_high_critical_ma:.4f}",
            }  # fmt: skip
    return counters, dom, limits


#: The FEC fields of a COUNTERS hash as JSON members (bins S0..S15, then the three counters).
_FEC_MEMBERS = b",".join(
    b'"%s":"%%d"' % name.encode()
    for name in (
        *(f"SAI_PORT_STAT_IF_IN_FEC_CODEWORD_ERRORS_S{i}" for i in range(BINS)),
        "SAI_PORT_STAT_IF_IN_FEC_CORRECTABLE_FRAMES",
        "SAI_PORT_STAT_IF_IN_FEC_NOT_CORRECTABLE_FRAMES",
        "SAI_PORT_STAT_IF_IN_FEC_SYMBOL_ERRORS",
    )
)


def sonic_fec_texts(readings: Sequence[OpticReading]) -> dict[str, bytes]:
    """Each port's FEC fields as the JSON members a whole ``COUNTERS`` hash carries (no braces)."""
    return {
        r.port: _FEC_MEMBERS % (*r.fec_bins, r.fec_corrected, r.fec_uncorrectable, r.symbol_errors)
        for r in readings
        if len(r.fec_bins) == BINS
    }


# --- served over gNMI -------------------------------------------------------------------------

#: The OpenConfig families of link health, and the SONiC ones.
OPENCONFIG_OPTICS = (Family.OPTICS_INTERFACES, Family.OPTICS_COMPONENTS)
#: What a Cumulus switch serves besides: its ``phy`` FEC leaves and FEC histogram.
CUMULUS_OPTICS = (*OPENCONFIG_OPTICS, Family.OPTICS_CUMULUS)
SONIC_OPTICS = (Family.SONIC_FEC, Family.SONIC_DOM, Family.SONIC_DOM_LIMITS)
OPTICS_FAMILIES = frozenset(CUMULUS_OPTICS + SONIC_OPTICS)

#: The keyed list element of each OpenConfig optics root (interface name, component name).
OPTICS_ROOTS: dict[Family, tuple[PElem, ...]] = {
    Family.OPTICS_INTERFACES: (PElem("interfaces"), PElem("interface", (("name", "*"),))),
    Family.OPTICS_COMPONENTS: (PElem("components"), PElem("component", (("name", "*"),))),
    Family.OPTICS_CUMULUS: (PElem("interfaces"), PElem("interface", (("name", "*"),))),
}

_T = "transceiver/thresholds/threshold[severity=openconfig-alarm-types:{}]/state/{}"
_CH = "transceiver/physical-channels/channel[index=1]/state/{}/instant"
_Getter = Callable[[OpticReading], Any]


def _bin(k: int) -> _Getter:
    def get(r: OpticReading) -> Any:
        return r.fec_bins[k]

    return get


def _limit(name: str) -> _Getter:
    def get(r: OpticReading) -> Any:
        return None if r.thresholds is None else getattr(r.thresholds, name)

    return get


#: (path below the root, kind, ON_CHANGE under TARGET_DEFINED, how to read it from a reading).
_OC: dict[Family, tuple[tuple[str, Kind, bool, _Getter], ...]] = {
    Family.OPTICS_INTERFACES: (
        ("state/transceiver", Kind.TEXT, True, lambda r: r.component),
        ("ethernet/state/counters/fec-corrected-blocks", Kind.UINT, False, lambda r: r.fec_corrected),
        ("ethernet/state/counters/fec-uncorrectable-blocks", Kind.UINT, False, lambda r: r.fec_uncorrectable),
        ("ethernet/state/counters/in-symbol-error", Kind.UINT, False, lambda r: r.symbol_errors),
        ("ethernet/state/pre-fec-ber/instant", Kind.FLOAT, False, lambda r: r.pre_fec_ber),
        ("ethernet/state/post-fec-ber/instant", Kind.FLOAT, False, lambda r: r.post_fec_ber),
    ),
    Family.OPTICS_COMPONENTS: (
        ("state/temperature/instant", Kind.FLOAT, False, lambda r: r.temperature_c),
        (_CH.format("input-power"), Kind.FLOAT, False, lambda r: r.rx_power_dbm),
        (_CH.format("output-power"), Kind.FLOAT, False, lambda r: r.tx_power_dbm),
        (_CH.format("laser-bias-current"), Kind.FLOAT, False, lambda r: r.laser_bias_ma),
        (_T.format("WARNING", "input-power-lower"), Kind.FLOAT, False, _limit("rx_low_warning_dbm")),
        (_T.format("WARNING", "laser-bias-current-upper"), Kind.FLOAT, False, _limit("bias_high_warning_ma")),
        (_T.format("CRITICAL", "input-power-lower"), Kind.FLOAT, False, _limit("rx_low_critical_dbm")),
        (_T.format("CRITICAL", "laser-bias-current-upper"), Kind.FLOAT, False, _limit("bias_high_critical_ma")),
    ),
}

_CUMULUS_BINS = "phy/histograms/state/rs-num-corr-err[upper-boundary={}]/count"
#: Cumulus Linux 5.15's phy leaves (NVIDIA's gNMI metrics; raw-ber per lane, one lane here).
_OC[Family.OPTICS_CUMULUS] = (
    ("phy/fec/state/rs-fec-no-error-blocks", Kind.UINT, False, _bin(0)),
    ("phy/fec/state/rs-fec-single-error-blocks", Kind.UINT, False, _bin(1)),
    ("phy/fec/state/rs-fec-uncorrectable-blocks", Kind.UINT, False, lambda r: r.fec_uncorrectable),
    ("phy/state/symbol-errors", Kind.UINT, False, lambda r: r.symbol_errors),
    ("phy/ber/state/effective-ber", Kind.FLOAT, False, lambda r: r.post_fec_ber),
    ("phy/channels/channel[id=1]/ber/state/raw-ber", Kind.FLOAT, False, lambda r: r.pre_fec_ber),
    *((_CUMULUS_BINS.format(k), Kind.UINT, False, _bin(k)) for k in range(16)),
)

#: SONiC field names per family (COUNTERS FEC fields; STATE_DB DOM tables), in JSON order.
SONIC_FIELDS: dict[Family, tuple[str, ...]] = {
    Family.SONIC_FEC: tuple(
        sorted(
            [f"SAI_PORT_STAT_IF_IN_FEC_CODEWORD_ERRORS_S{i}" for i in range(16)]
            + [
                f"SAI_PORT_STAT_IF_IN_FEC_{n}"
                for n in ("CORRECTABLE_FRAMES", "NOT_CORRECTABLE_FRAMES", "SYMBOL_ERRORS")
            ]
        )
    ),
    Family.SONIC_DOM: ("rx1power", "temperature", "tx1bias", "tx1power", "voltage"),
    Family.SONIC_DOM_LIMITS: ("rxpowerlowalarm", "rxpowerlowwarning", "txbiashighalarm", "txbiashighwarning"),
}
#: The table behind each SONiC optics family, and the STATE_DB tables.
SONIC_TABLES: dict[Family, str] = {
    Family.SONIC_FEC: "COUNTERS",
    Family.SONIC_DOM: "TRANSCEIVER_DOM_SENSOR",
    Family.SONIC_DOM_LIMITS: "TRANSCEIVER_DOM_THRESHOLD",
}
STATE_DB: dict[str, Family] = {
    "TRANSCEIVER_DOM_SENSOR": Family.SONIC_DOM,
    "TRANSCEIVER_DOM_THRESHOLD": Family.SONIC_DOM_LIMITS,
}

#: Every optics leaf table (plans read ON_CHANGE per leaf here).
OPTICS_LEAVES: dict[Family, tuple[Leaf, ...]] = {
    **{
        fam: tuple(Leaf(tuple(parse_xpath(p)), k, i, oc) for i, (p, k, oc, _) in enumerate(rows))
        for fam, rows in _OC.items()
    },
    **{
        fam: tuple(
            Leaf((PElem(n),), Kind.UINT if fam is Family.SONIC_FEC else Kind.TEXT, i, False)
            for i, n in enumerate(names)
        )
        for fam, names in SONIC_FIELDS.items()
    },
}


def select_optics(elems: Sequence[PElem], families: Sequence[Family] = OPENCONFIG_OPTICS) -> list[Selection]:
    """What an OpenConfig request path selects among the optics leaves of ``families`` ([]: nothing)."""
    found: dict[tuple[Family, str | None], list[int]] = {}
    for family in families:
        root = OPTICS_ROOTS[family]
        for index, leaf in enumerate(OPTICS_LEAVES[family]):
            binds = match_template(tuple(elems), root + leaf.rel, len(root) - 1)
            if binds is not None:
                found.setdefault((family, binds[0]), []).append(index)
    return [Selection(f, tuple(ix), port) for (f, port), ix in found.items()]


def typed(kind: Kind, value: Any, encoding: Encoding) -> bytes:
    """An encoded TypedValue of an optics leaf."""
    proto = encoding is Encoding.PROTO
    if kind is Kind.UINT:
        v = int(value) & U64_MAX
        return b"\x18" + varint(v) if proto else json_ietf(b'"%d"' % v)
    if kind is Kind.FLOAT:
        if proto:
            return b"\x71" + struct.pack("<d", float(value))  # double_val (field 14)
        return json_ietf(b'"%s"' % repr(float(value)).encode())
    text = str(value)
    return string_val(text.encode()) if proto else json_ietf(json.dumps(text).encode())


class OpticsRenderer:
    """OpenConfig optics answers: one group per interface or component; owns its path caches."""

    def __init__(self) -> None:
        self._prefixes: dict[tuple[str, Family, str, tuple[PElem, ...]], bytes] = {}
        self._paths: dict[tuple[Family, int], bytes] = {}
        self._splits: dict[tuple[str, Family, int], tuple[tuple[PElem, ...], bytes]] = {}

    def prefix(self, target: str, family: Family, name: str, below: tuple[PElem, ...] = ()) -> bytes:
        """The prefix field naming one interface or component (and a container below it)."""
        key = (target, family, name, below)
        found = self._prefixes.get(key)
        if found is None:
            if len(self._prefixes) >= 200_000:
                self._prefixes.clear()
            root = OPTICS_ROOTS[family]
            elems = [*root[:-1], PElem(root[-1].name, (("name", name),)), *below]
            found = self._prefixes[key] = prefix_field(path_bytes(elems, target))
        return found

    def _path(self, family: Family, index: int) -> bytes:
        found = self._paths.get((family, index))
        if found is None:
            found = self._paths[(family, index)] = path_bytes(OPTICS_LEAVES[family][index].rel)
        return found

    def _split(self, layout: Layout, family: Family, index: int) -> tuple[tuple[PElem, ...], bytes]:
        """(container below the root, path bytes below it) of a leaf in ``layout`` (EOS)."""
        key = (layout.name, family, index)
        found = self._splits.get(key)
        if found is None:
            rel = OPTICS_LEAVES[family][index].rel
            ci, below = layout.split(Family.INTERFACES, rel)
            container = layout.containers[Family.INTERFACES][ci] if ci >= 0 else ()
            found = self._splits[key] = (container, path_bytes(below))
        return found

    def render(
        self,
        target: str,
        sel: Selection,
        encoding: Encoding,
        readings: Sequence[OpticReading],
        layout: Layout | None = None,
    ) -> list[Group]:
        """The groups of one selection (readings of the switch's present, cabled ports); with an
        interface ``layout`` (EOS), interface leaves go in one group per container, as the others."""
        rows = _OC[sel.family]
        by_component = sel.family is Family.OPTICS_COMPONENTS
        cut = layout if layout is not None and not by_component and Family.INTERFACES in layout.containers else None
        groups: list[Group] = []
        for r in readings:
            name = r.component if by_component else r.port
            if sel.port is not None and name != sel.port:
                continue
            parts: dict[tuple[PElem, ...], tuple[list[bytes], list[bytes]]] = {}
            for i in sel.leaves:
                _, kind, _, get = rows[i]
                value = get(r)
                if value is None:
                    continue
                container, path = ((), self._path(sel.family, i)) if cut is None else self._split(cut, sel.family, i)
                keys, ups = parts.setdefault(container, ([], []))
                keys.append(path)
                ups.append(update_field(path, typed(kind, value, encoding)))
            for container, (keys, ups) in parts.items():
                groups.append(Group(r.port, self.prefix(target, sel.family, name, container), keys, ups))
        return groups


class SonicOpticsRenderer:
    """SONiC's FEC fields (COUNTERS_DB) and DOM tables (STATE_DB) as sonic-gnmi answers them."""

    def __init__(self) -> None:
        self._prefixes: dict[str, bytes] = {}

    def prefix(self, db: str) -> bytes:
        """The prefix of a DB target's Notifications (target only)."""
        found = self._prefixes.get(db)
        if found is None:
            found = self._prefixes[db] = prefix_field(path_bytes((), db))
        return found

    def render(self, db: str, sel: Selection, readings: Sequence[OpticReading]) -> list[Group]:
        """The groups answering one selection (see the module docstring for the forms)."""
        counters, dom, limits = sonic_tables(list(readings))
        table = {Family.SONIC_FEC: counters, Family.SONIC_DOM: dom, Family.SONIC_DOM_LIMITS: limits}[sel.family]
        names = [SONIC_FIELDS[sel.family][i] for i in sel.leaves]
        name = SONIC_TABLES[sel.family]
        prefix = self.prefix(db)
        rows = sorted((p, {n: f[n] for n in names if n in f}) for p, f in table.items())
        rows = [(p, f) for p, f in rows if f and (sel.port is None or p == sel.port)]
        if sel.port is None and (sel.family is Family.SONIC_FEC or len(names) > 1):
            if not rows:
                return []
            doc = {p: f for p, f in rows}
            if sel.family is Family.SONIC_FEC:  # COUNTERS is keyed: its glob is sonic-gnmi's virtual path
                key = path_bytes([PElem(name), PElem(sel.glob or "Ethernet*")])
            else:  # the table itself (or a glob of its keys): all its keys
                key = path_bytes([PElem(name), *([PElem(sel.glob)] if sel.glob else [])])
            return [Group("", prefix, (key,), [update_field(key, json_ietf(json.dumps(doc).encode()))])]
        groups: list[Group] = []
        for port, fields in rows:
            if len(names) == 1:
                key = path_bytes([PElem(name), PElem(port), PElem(names[0])])
                value = string_val(fields[names[0]].encode())
            else:
                key = path_bytes([PElem(name), PElem(port)])
                value = json_ietf(json.dumps(fields).encode())
            groups.append(Group(port, prefix, (key,), [update_field(key, value)]))
        return groups

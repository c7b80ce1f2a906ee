"""LLDP-MIB decoding: which interface an ``lldpLocPortNum`` is, and remote entries as readings.

``lldpRemLocalPortNum`` indexes lldpLocPortTable, not ifTable. Many agents use ifIndex there,
not all: Arista EOS numbers EthernetN as its ifIndex N but Management1 (ifIndex 999001) as 97,
and other agents number ports 1..N in their own order. So a local port number maps through
its lldpLocPortId when that names an interface (subtypes interfaceName, interfaceAlias, local),
then through lldpLocPortDesc, and only then is taken as an ifIndex.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from collector.oids import LLDP_CHASSIS_MAC, LLDP_PORT_MAC, LLDP_PORT_NAMED
from collector.records import LldpNeighborReading
from collector.snmp_walk import Value

_CHASSIS_NETWORK, _PORT_NETWORK = 5, 4  # networkAddress subtypes (IANA family octet + address)
_INTERFACE_ALIAS = 1


def text(value: Value | None) -> str:
    """A DisplayString-ish value as text (NULs and surrounding blanks dropped)."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace").strip("\x00 \t\r\n")
    return str(value)


def _printable(b: bytes) -> bool:
    return all(0x20 <= c < 0x7F for c in b)


def _mac(b: bytes) -> str:
    return ":".join(f"{c:02x}" for c in b)


def _network(b: bytes) -> str:
    family, addr = b[:1], b[1:]
    try:
        if family == b"\x01" and len(addr) == 4:
            return str(ipaddress.IPv4Address(addr))
        if family == b"\x02" and len(addr) == 16:
            return str(ipaddress.IPv6Address(addr))
    except ValueError:
        pass
    return _mac(b)


def identifier(subtype: Value | None, value: Value | None, *, mac: int, network: int) -> str:
    """A chassis or port id as people write it: ``aa:bb:..`` for MACs, dotted IPs, else text."""
    if not isinstance(value, bytes):
        return text(value)
    if subtype == mac and len(value) == 6:
        return _mac(value)
    if subtype == network and value:
        return _network(value)
    if _printable(value):
        return text(value)
    decoded = value.decode("utf-8", "replace")
    return decoded if "\ufffd" not in decoded and decoded.isprintable() else _mac(value)


def local_ports(
    loc: Mapping[str, Mapping[str, Value]],
    names: Mapping[str, str],
    aliases: Mapping[str, str],
) -> dict[str, str]:
    """lldpLocPortNum → our port name (an ifName), from lldpLocPortTable and the ifTable caches.

    ``loc`` maps column field (``id_subtype``, ``port_id``, ``port_desc``) → port num → value;
    ``names``/``aliases`` map ifIndex → ifName / ifAlias.
    """
    known = set(names.values())
    by_alias = {a: names[i] for i, a in aliases.items() if a and i in names}
    subtypes, ids, descs = loc.get("id_subtype", {}), loc.get("port_id", {}), loc.get("port_desc", {})
    out: dict[str, str] = {}
    for num in {*subtypes, *ids, *descs}:
        subtype, port_id, desc = subtypes.get(num), text(ids.get(num)), text(descs.get(num))
        if subtype in LLDP_PORT_NAMED and port_id in known:
            out[num] = port_id
        elif subtype == _INTERFACE_ALIAS and port_id in by_alias:
            out[num] = by_alias[port_id]
        elif desc in known:
            out[num] = desc
        elif num in names:  # the common convention: lldpLocPortNum = ifIndex
            out[num] = names[num]
        elif port_id:
            out[num] = port_id
    return out


def neighbors(rem: Mapping[str, Mapping[str, Value]]) -> tuple[dict[str, list[LldpNeighborReading]], int]:
    """lldpRemTable columns → (lldpRemLocalPortNum → neighbours in remIndex order, invalid rows)."""
    sysnames, port_ids = rem.get("system_name", {}), rem.get("port_id", {})
    chassis, descs = rem.get("chassis_id", {}), rem.get("port_desc", {})
    chassis_sub, port_sub = rem.get("chassis_subtype", {}), rem.get("port_subtype", {})
    keyed: list[tuple[str, int, LldpNeighborReading]] = []
    invalid = 0
    for index in {*sysnames, *port_ids, *chassis}:
        parts = index.split(".")
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            invalid += 1
            continue
        n = LldpNeighborReading(
            system_name=text(sysnames.get(index)),
            port_id=identifier(port_sub.get(index), port_ids.get(index), mac=LLDP_PORT_MAC, network=_PORT_NETWORK),
            port_description=text(descs.get(index)),
            chassis_id=identifier(
                chassis_sub.get(index), chassis.get(index), mac=LLDP_CHASSIS_MAC, network=_CHASSIS_NETWORK
            ),
        )
        keyed.append((parts[1], int(parts[2]), n))
    out: dict[str, list[LldpNeighborReading]] = {}
    for local, _, n in sorted(keyed, key=lambda k: (k[0], k[1])):
        out.setdefault(local, []).append(n)
    return out, invalid

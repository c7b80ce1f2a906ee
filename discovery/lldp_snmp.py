"""One switch's LLDP view over SNMP: LLDP-MIB and IF-MIB through the collector's SNMP clients.

A read is a GET of sysName and sysDescr (the switch answers, and says what it calls itself),
then three walks with the collector's table walker: ifName with ifHighSpeed (port names and
speeds by ifIndex; ifDescr too when an ifName is empty), lldpLocPortTable (which interface each
``lldpLocPortNum`` is: :func:`collector.snmp_lldp.local_ports`; ifAlias too when a port is named
by alias) and lldpRemTable's port id, its subtype, port description and system name. Only the
columns discovery reads are walked, each request sized for the names they usually hold.

The client is gufo-snmp where it serves the target, else pysnmp
(:func:`collector.snmp_client.choose_backend`), with the target's own timeout and retries on
every request. SNMP errors become :class:`~discovery.errors.SwitchFailed`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from collector import snmp_lldp
from collector.oids import IF_COUNTERS, IF_INDEX, LLDP_LOC_PORT, LLDP_PORT_MAC, LLDP_REM, Column
from collector.snmp_client import SnmpAuthError, SnmpClient, SnmpError, SnmpTimeout, choose_backend
from collector.snmp_gufo import GufoClient
from collector.snmp_pysnmp import PysnmpClient, PysnmpEngines
from collector.snmp_walk import Value
from collector.targets import SwitchTarget
from discovery.errors import SwitchFailed
from discovery.tables import Neighbor, SwitchTable, port_id_kind

SYS_DESCR, SYS_NAME = "1.3.6.1.2.1.1.1.0", "1.3.6.1.2.1.1.5.0"
#: Bytes a port name, port id or system name usually takes. The walker sizes its requests by it; a
#: longer value costs a retry with fewer rows per request, not a wrong answer.
TEXT_BYTES = 64
_INTERFACE_ALIAS = 1  # lldpLocPortIdSubtype interfaceAlias


def _sized(columns: tuple[Column, ...], *fields: str) -> tuple[Column, ...]:
    by = {c.field: c for c in columns}
    return tuple(replace(by[f], max_value_bytes=TEXT_BYTES) if by[f].kind == "bytes" else by[f] for f in fields)


#: ifName and ifHighSpeed; ifDescr only when an ifName is empty, ifAlias only when LLDP names ports by alias.
IF_NAMES: tuple[Column, ...] = (*_sized(IF_INDEX, "name"), next(c for c in IF_COUNTERS if c.field == "high_speed_mbps"))
IF_DESCR, IF_ALIAS = _sized(IF_INDEX, "descr"), _sized(IF_INDEX, "alias")
LOC_PORTS = _sized(LLDP_LOC_PORT, "id_subtype", "port_id", "port_desc")
#: lldpRemTable without the chassis columns: a neighbour is named by its system name.
REM_PORTS = _sized(LLDP_REM, "port_subtype", "port_id", "port_desc", "system_name")
_PORT_NETWORK = 4  # networkAddress subtype

#: sysDescr words → the NOS name an inventory uses (first match wins).
_NOS_WORDS: tuple[tuple[str, str], ...] = (
    ("arista", "eos"),
    ("sonic", "sonic"),
    ("junos", "junos"),
    ("juniper", "junos"),
    ("ios xr", "xr"),
    ("nx-os", "nxos"),
    ("cumulus", "cumulus"),
    ("sr linux", "srlinux"),
    ("onyx", "onyx"),
)


def nos_from_descr(descr: str) -> str | None:
    """The NOS a sysDescr names, when it names one we know."""
    low = descr.lower()
    return next((nos for word, nos in _NOS_WORDS if word in low), None)


def _client(target: SwitchTarget, engines: PysnmpEngines, invalid: list[int]) -> SnmpClient:
    def count(_what: str, n: int) -> None:
        invalid[0] += n

    if choose_backend(target) == "gufo":
        return GufoClient(target, count)
    return PysnmpClient(target, count, engines)


async def read_snmp(target: SwitchTarget, engines: PysnmpEngines) -> SwitchTable:
    """Read one switch's LLDP tables and port names; SwitchFailed when it does not answer or refuses."""
    invalid = [0]
    try:
        client = _client(target, engines, invalid)
    except SnmpError as exc:
        raise SwitchFailed(str(exc)) from exc
    try:
        scalars = await client.get([SYS_NAME, SYS_DESCR])
        interfaces = await _walk(client, IF_NAMES, None)
        ports = len(interfaces["name"]) or None
        if not ports or not all(snmp_lldp.text(v) for v in interfaces["name"].values()):
            interfaces.update(await _walk(client, IF_DESCR, ports))
        loc = await _walk(client, LOC_PORTS, ports)
        if _INTERFACE_ALIAS in loc["id_subtype"].values():
            interfaces.update(await _walk(client, IF_ALIAS, ports))
        rem = await _walk(client, REM_PORTS, len(loc["port_id"]) or ports)
    except SnmpTimeout as exc:
        raise SwitchFailed(f"no SNMP answer from {target.address} ({exc})") from exc
    except SnmpAuthError as exc:
        raise SwitchFailed(f"SNMP refused at {target.address} (community or SNMPv3 keys): {exc}") from exc
    except SnmpError as exc:
        raise SwitchFailed(f"SNMP error from {target.address}: {exc}") from exc
    finally:
        await client.close()
    return table_from_columns(target.switch, scalars, interfaces, loc, rem)


async def _walk(client: SnmpClient, columns: tuple[Column, ...], rows: int | None) -> dict[str, dict[str, Value]]:
    walked = await client.walk(columns, rows)
    return {c.field: walked.rows[i] for i, c in enumerate(columns)}


def table_from_columns(
    switch: str,
    scalars: Mapping[str, Value],
    interfaces: Mapping[str, Mapping[str, Value]],
    loc: Mapping[str, Mapping[str, Value]],
    rem: Mapping[str, Mapping[str, Value]],
) -> SwitchTable:
    """The :class:`SwitchTable` of one switch's answers, each table as column field → index → value."""
    names = {i: snmp_lldp.text(v) for i, v in interfaces.get("name", {}).items()}
    for i, v in interfaces.get("descr", {}).items():
        if not names.get(i):
            names[i] = snmp_lldp.text(v) or f"ifIndex{i}"
    aliases = {i: snmp_lldp.text(v) for i, v in interfaces.get("alias", {}).items()}
    local = snmp_lldp.local_ports(loc, names, aliases)
    speeds: dict[str, int] = {}
    for i, v in interfaces.get("high_speed_mbps", {}).items():
        if isinstance(v, int) and v > 0 and i in names:
            speeds[names[i]] = v // 1000
    return SwitchTable(
        switch=switch,
        protocol="snmp",
        neighbors=remote_table(rem, local, names),
        if_names={int(i): n for i, n in names.items() if i.isdigit()},
        ports=frozenset(names.values()),
        speeds_gbps=speeds,
        system_name=snmp_lldp.text(scalars.get(SYS_NAME)) or None,
        nos=nos_from_descr(snmp_lldp.text(scalars.get(SYS_DESCR))),
    )


def remote_table(
    rem: Mapping[str, Mapping[str, Value]], local: Mapping[str, str], names: Mapping[str, str]
) -> dict[str, tuple[Neighbor, ...]]:
    """lldpRemTable columns → local port name → its neighbours, in remIndex order.

    The index is ``timeMark.localPortNum.remIndex``; the local port maps through
    lldpLocPortTable (``local``), else as an ifIndex (``names``), else stays ``lldpLocPortNum N``.
    """
    sysnames, port_ids, descs = rem.get("system_name", {}), rem.get("port_id", {}), rem.get("port_desc", {})
    port_sub, chassis = rem.get("port_subtype", {}), rem.get("chassis_id", {})
    keyed: list[tuple[str, int, Neighbor]] = []
    for index in {*sysnames, *port_ids}:
        parts = index.split(".")
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            continue
        subtype = port_sub.get(index)
        port_id = snmp_lldp.identifier(subtype, port_ids.get(index), mac=LLDP_PORT_MAC, network=_PORT_NETWORK)
        n = Neighbor(
            system_name=snmp_lldp.text(sysnames.get(index)),
            port_id=port_id,
            port_description=snmp_lldp.text(descs.get(index)),
            chassis_id=snmp_lldp.text(chassis.get(index)) if index in chassis else "",
            kind=port_id_kind(port_id, subtype if isinstance(subtype, int) else None),
        )
        num = parts[1]
        port = local.get(num) or names.get(num) or f"lldpLocPortNum {num}"
        keyed.append((port, int(parts[2]), n))
    out: dict[str, list[Neighbor]] = {}
    for port, _, n in sorted(keyed, key=lambda k: (k[0], k[1])):
        out.setdefault(port, []).append(n)
    return {port: tuple(ns) for port, ns in out.items()}

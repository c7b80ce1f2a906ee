"""The neutral record of one switch's LLDP view, what both readers produce and the graph reads.

A remote port id is read by its kind (IEEE 802.1AB LldpPortIdSubtype, or its shape when the
source does not say, as the OpenConfig leaves the collector profiles read):

* ``name``: an interface name (subtype 5 interfaceName, 1 interfaceAlias), what most switch
  NOSes send: ``Ethernet1/1``, ``swp3s1``;
* ``local``: a locally assigned number (subtype 7): Junos sends the port's SNMP ifIndex and the
  port's name in the port description;
* ``mac``: a MAC address (subtype 3): what lldpd sends on a Linux server by default (the NIC's
  name, ``mlx5_0``, in the port description), and what a few switch NOSes send.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

PortIdKind = Literal["name", "local", "mac"]

#: LldpPortIdSubtype (IEEE 802.1AB-2005) values that say how to read a port id.
SUBTYPE_ALIAS, SUBTYPE_MAC, SUBTYPE_NAME, SUBTYPE_LOCAL = 1, 3, 5, 7

_MAC = re.compile(
    r"[0-9a-f]{2}([:-])[0-9a-f]{2}(?:\1[0-9a-f]{2}){4}"  # aa:bb:cc:dd:ee:ff, aa-bb-...
    r"|[0-9a-f]{4}\.[0-9a-f]{4}\.[0-9a-f]{4}",  # Cisco's aabb.ccdd.eeff
    re.IGNORECASE,
)


def is_mac(text: str) -> bool:
    """Whether ``text`` is written as a MAC address."""
    return _MAC.fullmatch(text.strip()) is not None


def port_id_kind(port_id: str, subtype: int | None = None) -> PortIdKind:
    """How to read a remote port id: by its subtype when the source gave one, else by its shape."""
    if subtype == SUBTYPE_MAC:
        return "mac"
    if subtype in (SUBTYPE_NAME, SUBTYPE_ALIAS):
        return "name"
    if subtype == SUBTYPE_LOCAL:
        return "local" if port_id.isdigit() else "name"
    if is_mac(port_id):
        return "mac"
    return "local" if port_id.isdigit() else "name"


@dataclass(frozen=True, slots=True)
class Neighbor:
    """One LLDP remote-table entry as a switch saw it on one of its ports."""

    system_name: str
    port_id: str
    port_description: str = ""
    chassis_id: str = ""
    kind: PortIdKind = "name"


@dataclass(slots=True)
class SwitchTable:
    """What one switch told us: its neighbours per local port, and what names its ports.

    ``if_names`` maps ifIndex → port name (SNMP ifName; over gNMI only when it was asked for,
    see :func:`discovery.lldp_gnmi.read_ifindex`); ``ports`` every port name the switch
    reported; ``speeds_gbps`` the speeds it reported per port (0 or absent: unknown).
    """

    switch: str
    protocol: str
    neighbors: dict[str, tuple[Neighbor, ...]] = field(default_factory=dict)
    if_names: dict[int, str] = field(default_factory=dict)
    ports: frozenset[str] = frozenset()
    speeds_gbps: dict[str, int] = field(default_factory=dict)
    #: How the switch names itself (sysName over SNMP), when it said; LLDP neighbours use it.
    system_name: str | None = None
    nos: str | None = None

    def known_ports(self) -> frozenset[str]:
        """Every port name seen on this switch: reported, or carrying an LLDP neighbour."""
        return self.ports | frozenset(self.neighbors) | frozenset(self.if_names.values())

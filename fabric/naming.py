"""Port names as each network OS spells them, for the AIPod builder and the simulator.

A real fabric's ports are free text (``fabric.model``); only a *generated* fabric needs a plan
for naming them, and this is it. A generated switch has ``radix`` ports of ``speed_gbps``;
on a 51.2T switch those are 64 cages of 800G, each broken out in two 400G ports, which is
how the names below count them (``n`` is the 1-based port of the plan):

=========  ==============================  ==========================  ===============================
naming     port ``n``                      example (n = 1, 2, 3)        ifIndex (SNMP), as that NOS has it
=========  ==============================  ==========================  ===============================
swp        ``swp{n}`` (the original plan)  swp1, swp2, swp3            n
openconfig ``1/1/c{n}/1`` (SR OS style)    1/1/c1/1, 1/1/c2/1, ...     n
eos        ``Ethernet{cage}/{1|5}``        Ethernet1/1, Ethernet1/5,   1000 x cage + lane
                                           Ethernet2/1
sonic      ``Ethernet{4 (n-1)}``           Ethernet0, Ethernet4,       first lane / 4 + 1 (sonic-snmpagent)
                                           Ethernet8
junos      ``et-0/0/{cage-1}:{0|1}``       et-0/0/0:0, et-0/0/0:1,     500 + n (kernel-assigned)
                                           et-0/0/1:0
xr         ``FourHundredGigE0/0/0/{n-1}``  FourHundredGigE0/0/0/0      interface handle order, 3 + 2n
srlinux    ``ethernet-1/{cage}/{1|2}``     ethernet-1/1/1,             (1 << 14) + (cage << 6) + lane
                                           ethernet-1/1/2
cumulus    ``swp{cage}s{0|1}``             swp1s0, swp1s1, swp2s0      Linux ifindex: 2 + n (lo, eth0)
=========  ==============================  ==========================  ===============================

Servers' rail NICs are ``mlx5_{k-1}`` for rail ``k`` in every naming but ``swp``, which keeps
``nic{k}``. ``mixed`` gives each switch one of the seven NOS namings round-robin in the
fabric's order, so a 512-GPU fabric has every one of them at every tier.
"""

from __future__ import annotations

from collections.abc import Callable

from fabric.errors import TopologyError
from fabric.model import legacy_port_name

#: The NOS namings, in the order ``mixed`` deals them.
NOS_NAMINGS: tuple[str, ...] = ("openconfig", "eos", "sonic", "junos", "xr", "srlinux", "cumulus")
#: Every value ``--naming`` takes.
NAMINGS: tuple[str, ...] = ("swp", *NOS_NAMINGS, "mixed")


def _cage(n: int) -> tuple[int, int]:
    """(cage, lane 0|1) of plan port ``n``: two 400G ports per 800G cage."""
    return (n + 1) // 2, (n - 1) % 2


_NAMES: dict[str, Callable[[int], str]] = {
    "swp": legacy_port_name,
    "openconfig": lambda n: f"1/1/c{n}/1",
    "eos": lambda n: f"Ethernet{_cage(n)[0]}/{1 + 4 * _cage(n)[1]}",
    "sonic": lambda n: f"Ethernet{4 * (n - 1)}",
    "junos": lambda n: f"et-0/0/{_cage(n)[0] - 1}:{_cage(n)[1]}",
    "xr": lambda n: f"FourHundredGigE0/0/0/{n - 1}",
    "srlinux": lambda n: f"ethernet-1/{_cage(n)[0]}/{_cage(n)[1] + 1}",
    "cumulus": lambda n: f"swp{_cage(n)[0]}s{_cage(n)[1]}",
}

_IF_INDEX: dict[str, Callable[[int], int]] = {
    "swp": lambda n: n,
    "openconfig": lambda n: n,
    "eos": lambda n: 1000 * _cage(n)[0] + 1 + 4 * _cage(n)[1],
    "sonic": lambda n: (4 * (n - 1)) // 4 + 1,
    "junos": lambda n: 500 + n,
    "xr": lambda n: 3 + 2 * n,
    "srlinux": lambda n: (1 << 14) + (_cage(n)[0] << 6) + _cage(n)[1] + 1,
    "cumulus": lambda n: 2 + n,
}


def check_naming(naming: str) -> str:
    """``naming`` if it is one of :data:`NAMINGS`; a TopologyError listing them otherwise."""
    if naming not in NAMINGS:
        raise TopologyError(f"unknown naming {naming!r} (known: {', '.join(NAMINGS)})")
    return naming


def port_names(naming: str, radix: int) -> tuple[str, ...]:
    """The names of plan ports 1..radix under ``naming`` (one NOS, or ``swp``)."""
    name = _NAMES[naming]
    return tuple(name(n) for n in range(1, radix + 1))


def nic_names(naming: str, rails: int) -> tuple[str, ...]:
    """A server's rail NIC names, rail 1 first: ``nic1..`` under ``swp``, ``mlx5_0..`` otherwise."""
    if naming == "swp":
        return tuple(f"nic{k}" for k in range(1, rails + 1))
    return tuple(f"mlx5_{k - 1}" for k in range(1, rails + 1))


def switch_naming(naming: str, ordinal: int) -> str:
    """The NOS naming of the ``ordinal``-th switch (0-based) of a fabric named ``naming``."""
    if naming == "mixed":
        return NOS_NAMINGS[ordinal % len(NOS_NAMINGS)]
    return naming


def if_index(nos: str | None, position: int) -> int:
    """The SNMP ifIndex a switch of ``nos`` gives the ``position``-th (1-based) port of its plan.

    A NOS this module does not know (or none) numbers its ports 1, 2, 3...
    """
    scheme = _IF_INDEX.get(nos or "swp", _IF_INDEX["swp"])
    return scheme(position)

"""The training-traffic model: lazy, closed-form counters for every direction of every link.

Nothing ticks. A training job alternates a *communicate* phase (AllReduce at the NICs' peak)
and a *compute* phase (a trickle: pipeline activations, storage, control traffic), with a
fixed period. Its weighted clock :meth:`Phase.phi` is the integral of that square wave in
integer units (:data:`COMM_WEIGHT` per nanosecond while communicating, :data:`COMPUTE_WEIGHT`
while computing), so a direction whose peak rate is ``R`` bytes/s has sent exactly
``R / PHI_PER_S * (phi(t) - phi(t0))`` bytes since ``t0``.

A :class:`Flow` is one direction of one cable. Its rate changes only at events (a phase never
changes it: the phase is inside ``phi``); at each change the flow first banks what it carried
since the previous change, so counters stay continuous and monotonic (piecewise integration).
Tiny or fault-driven counters (multicast, FCS errors, PFC pause frames) are :class:`Linear`
pieces of plain time. Both ends of a switch-to-switch cable read the same two flows, so the
transmit counters of one end are the receive counters of the other, by construction.

The load split (:func:`leaf_rates`, :func:`spine_up_rates`) is the AIPod pattern: GPU ``k``'s
NIC feeds leaf ``k`` of its group; a share of that leaf's traffic stays under the leaf (its
servers' peers in the same group), the rest goes up, spread by ECMP evenly over the leaf's live
uplinks; a spine sends a smaller cross-rail share up to the superspines. Traffic is symmetric
(AllReduce sends as much as it receives), so both directions of a cable carry the same load,
give or take each flow's small fixed jitter.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

#: Weighted-clock units per nanosecond in the communicate phase and in the compute phase:
#: the compute phase runs at COMPUTE_WEIGHT / COMM_WEIGHT (5 %) of the communicate rate.
COMM_WEIGHT = 20
COMPUTE_WEIGHT = 1
#: Weighted-clock units per second of communication: a peak rate in bytes/s divided by this
#: is a rate in bytes per unit of ``phi``.
PHI_PER_S = 1_000_000_000 * COMM_WEIGHT
NS_PER_S = 1_000_000_000

#: Usable share of a link's line rate (framing, IFG): the most a flow can carry.
LINE_EFFICIENCY = 0.97
#: RDMA (RoCEv2) traffic class: pauses on this priority stall the training traffic.
ROCE_PRIORITY = 3
#: How long one PFC pause frame with the maximum quanta (65535 x 512 bit times) stops a sender.
PAUSE_QUANTA_BITS = 65535 * 512


@dataclass(frozen=True, slots=True)
class TrafficParams:
    """The job and fabric-wide traffic figures; :meth:`from_seed` draws realistic ones."""

    period_ns: int = 3_000_000_000  # one training step: communicate then compute
    comm_ns: int = 1_200_000_000  # communicate phase at the start of each step
    offset_ns: int = 0  # where in its step the job was at the fabric's origin
    nic_peak: float = 0.9  # share of line rate a NIC reaches while communicating
    up_share: float = 0.75  # share of a leaf's server traffic that crosses to its spines
    cross_rail_share: float = 0.15  # share of a spine's traffic that goes up to superspines
    jitter: float = 0.02  # each flow's fixed deviation from its nominal rate, at most
    frame_bytes: tuple[int, int] = (3900, 4150)  # range of a flow's mean frame size (RoCE MTU 4096)
    mcast_pps: float = 0.2  # LLDP, PTP, IGMP: tiny, on every live link
    uptime_ns: int = 12 * 86_400 * NS_PER_S  # how long the fabric ran before the simulation

    @classmethod
    def from_seed(cls, seed: int) -> TrafficParams:
        """Deterministic parameters for ``seed``: a 2-4 s step communicating ~40 % of it."""
        rng = random.Random(f"traffic:{seed}")
        period_ms = rng.randint(2000, 4000)
        comm_ms = round(period_ms * rng.uniform(0.35, 0.45))
        return cls(
            period_ns=period_ms * 1_000_000,
            comm_ns=comm_ms * 1_000_000,
            offset_ns=rng.randrange(period_ms) * 1_000_000,
            nic_peak=round(rng.uniform(0.85, 0.95), 3),
            uptime_ns=rng.randint(3 * 86_400, 30 * 86_400) * NS_PER_S,
        )

    @property
    def comm_fraction(self) -> float:
        """Share of a step spent communicating."""
        return self.comm_ns / self.period_ns

    @property
    def mean_level(self) -> float:
        """Mean rate over a step as a share of the peak rate."""
        f = self.comm_fraction
        return f + (1.0 - f) * COMPUTE_WEIGHT / COMM_WEIGHT


class Phase:
    """The job's weighted clock: ``phi(t)`` integrates the communicate/compute square wave."""

    __slots__ = ("_comm", "_period", "_start", "_step", "_zero")

    def __init__(self, params: TrafficParams, origin_ns: int) -> None:
        self._period = params.period_ns
        self._comm = params.comm_ns
        self._step = params.comm_ns * COMM_WEIGHT + (params.period_ns - params.comm_ns) * COMPUTE_WEIGHT
        self._start = origin_ns - params.offset_ns
        self._zero = 0
        self._zero = self.phi(origin_ns)

    def phi(self, t_ns: int) -> int:
        """Weighted units since the origin; non-decreasing in ``t_ns`` (exact integer arithmetic)."""
        steps, into = divmod(t_ns - self._start, self._period)
        if into < self._comm:
            part = into * COMM_WEIGHT
        else:
            part = self._comm * COMM_WEIGHT + (into - self._comm) * COMPUTE_WEIGHT
        return steps * self._step + part - self._zero

    def communicating(self, t_ns: int) -> bool:
        """True during the communicate phase of a step."""
        return (t_ns - self._start) % self._period < self._comm


class Linear:
    """A counter that grows at a constant rate between events: ``acc + rate * (t - t0)``."""

    __slots__ = ("acc", "rate", "t0")

    def __init__(self, t0: int) -> None:
        self.acc = 0
        self.t0 = t0
        self.rate = 0.0  # per nanosecond

    def value(self, t_ns: int) -> int:
        """The count at ``t_ns`` (``t_ns`` not before the last change)."""
        return self.acc + int(self.rate * (t_ns - self.t0))

    def set_rate(self, t_ns: int, per_s: float) -> None:
        """Bank the count so far and continue at ``per_s`` from ``t_ns``."""
        rate = per_s / NS_PER_S
        if rate != self.rate:
            self.acc = self.value(t_ns)
            self.t0 = t_ns
            self.rate = rate


class FlowExtra:
    """The rare, fault-driven counters of a flow: FCS errors and PFC pauses per priority."""

    __slots__ = ("errors", "pfc")

    def __init__(self, t0: int) -> None:
        self.errors = Linear(t0)
        self.pfc: list[Linear | None] = [None] * 8

    def pfc_counts(self, t_ns: int) -> tuple[int, ...]:
        """Pause frames carried per priority 0..7."""
        return tuple(0 if seg is None else seg.value(t_ns) for seg in self.pfc)


class Flow:
    """One direction of one cable: octets, packets and multicast as lazy closed forms.

    ``base_bps`` is the load the split assigns (peak bytes/s); ``pause`` the share left by PFC
    pauses against this direction; the effective rate is their product times ``noise``.
    """

    __slots__ = (
        "base_bps",
        "extra",
        "frame",
        "live",
        "mc_acc",
        "mc_rate",
        "mc_t0",
        "noise",
        "oct_acc",
        "oct_phi0",
        "oct_rate",
        "pause",
    )

    def __init__(self, t0: int, noise: float, frame: int) -> None:
        self.oct_acc = 0
        self.oct_phi0 = 0
        self.oct_rate = 0.0  # bytes per phi unit
        self.mc_acc = 0
        self.mc_t0 = t0
        self.mc_rate = 0.0  # packets per ns
        self.noise = noise
        self.frame = frame
        self.base_bps = 0.0
        self.pause = 1.0
        self.live = False
        self.extra: FlowExtra | None = None

    def octets(self, phi: int) -> int:
        """Octets carried up to weighted time ``phi``."""
        return self.oct_acc + int(self.oct_rate * (phi - self.oct_phi0))

    def multicast(self, t_ns: int) -> int:
        """Multicast packets carried up to ``t_ns``."""
        return self.mc_acc + int(self.mc_rate * (t_ns - self.mc_t0))

    def set_load(self, t_ns: int, phi: int, base_bps: float, live: bool, mcast_pps: float) -> None:
        """Change the flow's load at ``t_ns`` (``phi`` = its weighted time), banking what it carried."""
        self.base_bps = base_bps
        rate = base_bps * self.noise * self.pause / PHI_PER_S if live else 0.0
        if rate != self.oct_rate:
            self.oct_acc = self.octets(phi)
            self.oct_phi0 = phi
            self.oct_rate = rate
        if live != self.live:
            self.live = live
            self.mc_acc = self.multicast(t_ns)
            self.mc_t0 = t_ns
            self.mc_rate = mcast_pps / NS_PER_S if live else 0.0

    def extras(self, t0: int) -> FlowExtra:
        """The flow's fault counters, created on first use."""
        if self.extra is None:
            self.extra = FlowExtra(t0)
        return self.extra


def link_capacity(speed_bps: int) -> float:
    """The most a flow carries on a link of ``speed_bps``, in bytes/s."""
    return speed_bps / 8 * LINE_EFFICIENCY


def spread(demand: float, caps: Sequence[float]) -> tuple[list[float], float]:
    """ECMP: ``demand`` split evenly over the links with capacity > 0, each capped at its capacity.

    Returns the per-link loads and the total carried. ECMP hashes flows, it does not weigh
    links, so a slow link gets an equal share and drops (here: does not carry) the excess.
    """
    live = sum(1 for c in caps if c > 0.0)
    if live == 0 or demand <= 0.0:
        return [0.0] * len(caps), 0.0
    share = demand / live
    loads = [min(share, c) if c > 0.0 else 0.0 for c in caps]
    return loads, sum(loads)


def leaf_rates(
    params: TrafficParams, nic_bps: Sequence[float], up_caps: Sequence[float]
) -> tuple[list[float], list[float]]:
    """Per-server and per-uplink loads of a leaf (peak bytes/s).

    ``nic_bps`` is each down port's NIC peak (0 for no live server), ``up_caps`` each uplink's
    capacity (0 when down). The cross-group share goes up; what the uplinks cannot carry
    throttles the leaf's servers, as a collective waits for its slowest path.
    """
    demand = params.up_share * sum(nic_bps)
    ups, carried = spread(demand, up_caps)
    scale = 1.0 if demand <= 0.0 else (1.0 - params.up_share) + params.up_share * carried / demand
    return [b * scale for b in nic_bps], ups


def spine_up_rates(params: TrafficParams, down_loads: Sequence[float], up_caps: Sequence[float]) -> list[float]:
    """Per-uplink loads of a spine: the cross-rail share of what its leaves send it."""
    ups, _ = spread(params.cross_rail_share * sum(down_loads), up_caps)
    return ups


def pause_share(pps: float, speed_bps: int) -> float:
    """Share of time a sender stays paused under ``pps`` max-quanta pause frames (at most 0.95)."""
    if speed_bps <= 0:
        return 0.0
    return min(0.95, pps * PAUSE_QUANTA_BITS / speed_bps)

"""Simulated transceivers and FEC: digital optical monitoring (DOM) and codeword-error bins per port.

Every cabled port of a simulated switch has an optic with its own digital diagnostics (rx/tx
power in dBm, laser bias in mA, temperature in °C) and the module's own WARNING/CRITICAL
thresholds, and an RS(544,514) FEC decoder counting codewords by their number of symbol errors
(SONiC's ``SAI_PORT_STAT_IF_IN_FEC_CODEWORD_ERRORS_S0..S15``), corrected and uncorrectable
codewords, symbol errors, and the pre-/post-FEC bit error ratio.

The physics is a small closed model, deterministic for the seed and the fault history:

* DOM readings carry a small uniform wobble (:data:`RX_NOISE_DB`, :data:`BIAS_NOISE_MA`, drawn
  per second of the clock), as a real module's do;
* received power falls by the link's extra loss (dB); the pre-FEC BER is
  ``10 ** (base + BER_PER_DB * loss)`` (a port's ``base`` is about -9, a healthy 400G PAM4
  link); symbol errors are independent, ``p_s = 1 - (1 - BER) ** 10``, so the number of errors
  in a 544-symbol codeword is Poisson with mean ``544 p_s``; a codeword with more than 15 is
  uncorrectable;
* the link fails (its cable goes down, :mod:`simulator.fault_effects`) once the BER reaches
  :data:`FAIL_BER` (post-FEC frame loss that no transport survives), or once the laser bias
  reaches :data:`BIAS_FAIL_MA`;
* counters are integrals of those rates over time: exact for constant conditions, a midpoint
  sum on a grid fine enough for 0.05 dB per step while a loss changes (monotonic, continuous).
  A failed link carries no codewords, so its FEC counters stand still.

Fault kinds (SPEC §10.5): ``optic_degrade`` adds ``db_per_hour`` of loss per hour from its
start; ``laser_aging`` raises the bias ``ma_per_hour`` at constant tx power; ``dirty_connector``
adds ``loss_db`` at once, then stays; ``fec_burst`` raises the BER by :data:`BURST_BER_FACTOR`
for ``duration_s``, then recovers. Clearing a fault removes its contribution (the optic was
replaced or the connector cleaned).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from fabric.model import Fabric

#: RS(544,514) "KP4": symbols per codeword, the most symbol errors it corrects, bits per symbol.
CODEWORD_SYMBOLS = 544
CORRECTABLE_SYMBOLS = 15
SYMBOL_BITS = 10
PAYLOAD_BITS = 5140
BINS = CORRECTABLE_SYMBOLS + 1  # S0..S15
#: log10 of the pre-FEC BER gained per dB of extra loss.
BER_PER_DB = 0.7
#: Pre-FEC BER at which the link is lost (KP4 gives up around 2.4e-4).
FAIL_BER = 5e-4
#: Laser bias at which the laser dies.
BIAS_FAIL_MA = 15.0
#: How much a ``fec_burst`` multiplies the BER while it lasts.
BURST_BER_FACTOR = 1e4
#: DOM readings wander by up to this much (uniform, a new draw every second of the clock), as real
#: modules' do: a trend must stand out of it.
RX_NOISE_DB = 0.05
BIAS_NOISE_MA = 0.02
#: Grid of the counters' integral while a loss changes: this many dB per step at most.
DB_PER_STEP = 0.05
_MIN_STEP_NS = 1_000_000
_MAX_STEP_NS = 60_000_000_000


@dataclass(frozen=True, slots=True)
class Thresholds:
    """A module's own alarm and warning thresholds (SFF-8636 / CMIS), as its DOM reports them."""

    rx_low_warning_dbm: float = -8.0
    rx_low_critical_dbm: float = -10.0
    bias_high_warning_ma: float = 11.0
    bias_high_critical_ma: float = 13.0
    temp_high_warning_c: float = 70.0
    temp_high_critical_c: float = 75.0


#: What every simulated module reports.
MODULE_THRESHOLDS = Thresholds()


@dataclass(frozen=True, slots=True)
class OpticReading:
    """One port's transceiver and FEC state at one instant.

    ``component`` is the transceiver's name in ``/components`` (the interface names it in
    ``state/transceiver``); counters are cumulative since the fabric's origin.
    """

    port: str
    component: str
    rx_power_dbm: float
    tx_power_dbm: float
    laser_bias_ma: float
    temperature_c: float
    thresholds: Thresholds | None
    pre_fec_ber: float
    post_fec_ber: float
    fec_corrected: int
    fec_uncorrectable: int
    symbol_errors: int
    fec_bins: tuple[int, ...]


def ber_of(base_log_ber: float, loss_db: float, burst: bool) -> float:
    """Pre-FEC BER of a port with ``loss_db`` of extra loss (``burst``: a FEC burst is on)."""
    log_ber = base_log_ber + BER_PER_DB * loss_db + (math.log10(BURST_BER_FACTOR) if burst else 0.0)
    return min(0.5, float(10.0**log_ber))


def loss_to_fail(base_log_ber: float) -> float:
    """Extra loss (dB) at which a port's BER reaches :data:`FAIL_BER`."""
    return (math.log10(FAIL_BER) - base_log_ber) / BER_PER_DB


def codeword_rates(ber: float, codewords_per_s: float) -> tuple[list[float], float, float]:
    """(bins S0..S15, uncorrectable, symbol errors) per second at ``ber``."""
    ps = 1.0 - (1.0 - ber) ** SYMBOL_BITS
    lam = CODEWORD_SYMBOLS * ps
    pmf = []
    p = math.exp(-lam)
    for k in range(BINS):
        pmf.append(p)
        p *= lam / (k + 1)
    uncorrectable = max(0.0, 1.0 - sum(pmf))
    bins = [codewords_per_s * q for q in pmf]
    return bins, codewords_per_s * uncorrectable, codewords_per_s * lam


#: Width of the rate vector: S0..S15, uncorrectable, symbol errors.
_WIDTH = BINS + 2


@dataclass(slots=True)
class _Segment:
    """Conditions between two changes: constant, or a loss growing linearly (then a grid)."""

    start_ns: int
    base: list[float]  # cumulative counters at start_ns
    loss0: float  # loss at start_ns
    db_per_ns: float  # how fast the loss grows (0: constant)
    burst: bool
    down: bool
    step_ns: int = 0
    prefix: list[list[float]] = field(default_factory=list)


class PortOptic:
    """One port's optic: its fixed figures, the faults acting on it, and its counters' segments."""

    def __init__(self, name: str, component: str, speed_bps: int, origin_ns: int, rng: random.Random) -> None:
        self.name = name
        self.component = component
        self.codewords_per_s = speed_bps / PAYLOAD_BITS
        self.rx0 = round(rng.uniform(-2.5, -1.0), 2)
        self.tx0 = round(rng.uniform(0.5, 1.5), 2)
        self.bias0 = round(rng.uniform(6.5, 7.5), 2)
        self.temp0 = round(rng.uniform(38.0, 46.0), 1)
        self.base_log_ber = round(rng.uniform(-9.3, -8.7), 3)
        self._noise_key = rng.getrandbits(64)
        #: fault id -> (kind, start ns, figure): "degrade" dB/h, "aging" mA/h, "dirty" dB, "burst" 0
        self.faults: dict[str, tuple[str, int, float]] = {}
        self.failed: set[str] = set()  # faults whose failure happened
        self.segments: list[_Segment] = [_Segment(origin_ns, [0.0] * _WIDTH, 0.0, 0.0, False, False)]

    # -- conditions ------------------------------------------------------------------------

    def loss_db(self, t: int) -> float:
        """Extra loss at ``t`` from the faults in force."""
        loss = 0.0
        for kind, start, figure in self.faults.values():
            if kind == "degrade":
                loss += figure * max(0, t - start) / 3.6e12
            elif kind == "dirty":
                loss += figure
        return loss

    def bias_ma(self, t: int) -> float:
        """Laser bias at ``t``."""
        extra = sum(f * max(0, t - s) / 3.6e12 for k, s, f in self.faults.values() if k == "aging")
        return self.bias0 + extra

    def burst(self) -> bool:
        """Whether a FEC burst is in force."""
        return any(k == "burst" for k, _, _ in self.faults.values())

    def down(self) -> bool:
        """Whether the optic has failed (its link carries nothing)."""
        return bool(self.failed)

    def changed(self, t: int) -> None:
        """Start a new segment at ``t`` (call after the faults or the failure changed)."""
        last = self.segments[-1]
        t = max(t, last.start_ns)
        base = self._cumulative(last, t)
        rate = sum(f for k, _, f in self.faults.values() if k == "degrade") / 3.6e12
        seg = _Segment(t, base, self.loss_db(t), rate, self.burst(), self.down())
        if rate > 0 and not seg.down:
            seg.step_ns = int(min(_MAX_STEP_NS, max(_MIN_STEP_NS, DB_PER_STEP / rate)))
            seg.prefix = [base]
        if last.start_ns == t:
            self.segments[-1] = seg
        else:
            self.segments.append(seg)

    # -- counters --------------------------------------------------------------------------

    def _rates(self, seg: _Segment, loss: float) -> list[float]:
        if seg.down:
            return [0.0] * _WIDTH
        bins, unc, sym = codeword_rates(ber_of(self.base_log_ber, loss, seg.burst), self.codewords_per_s)
        return [*bins, unc, sym + unc * (CORRECTABLE_SYMBOLS + 1)]

    def _cumulative(self, seg: _Segment, t: int) -> list[float]:
        dt = t - seg.start_ns
        if seg.step_ns == 0:
            rates = self._rates(seg, seg.loss0)
            return [b + r * dt / 1e9 for b, r in zip(seg.base, rates, strict=True)]
        i = dt // seg.step_ns
        while len(seg.prefix) <= i:
            j = len(seg.prefix) - 1
            mid = seg.loss0 + seg.db_per_ns * (j + 0.5) * seg.step_ns
            rates = self._rates(seg, mid)
            seg.prefix.append([b + r * seg.step_ns / 1e9 for b, r in zip(seg.prefix[j], rates, strict=True)])
        mid = seg.loss0 + seg.db_per_ns * (i + 0.5) * seg.step_ns
        rates = self._rates(seg, mid)
        part = dt - i * seg.step_ns
        return [b + r * part / 1e9 for b, r in zip(seg.prefix[i], rates, strict=True)]

    def read(self, t: int, thresholds: Thresholds | None) -> OpticReading:
        """The reading at ``t`` (clamped to the latest change: the state never un-happens)."""
        seg = self.segments[-1]
        t = max(t, seg.start_ns)
        cum = self._cumulative(seg, t)
        loss = self.loss_db(t)
        ber = 0.5 if self.down() else ber_of(self.base_log_ber, loss, self.burst())
        _, unc, _ = codeword_rates(ber, 1.0)
        post = unc * (CORRECTABLE_SYMBOLS + 1) * SYMBOL_BITS / (CODEWORD_SYMBOLS * SYMBOL_BITS)
        counts = [int(c) for c in cum]
        wobble = self.noise(t)
        rx = self.rx0 - loss + RX_NOISE_DB * wobble
        return OpticReading(
            port=self.name,
            component=self.component,
            rx_power_dbm=round(rx, 3),
            tx_power_dbm=self.tx0,
            laser_bias_ma=round(self.bias_ma(t) + BIAS_NOISE_MA * self.noise(t + 1), 3),
            temperature_c=self.temp0,
            thresholds=thresholds,
            pre_fec_ber=ber,
            post_fec_ber=min(0.5, post),
            fec_corrected=sum(counts[1:BINS]),
            fec_uncorrectable=counts[BINS],
            symbol_errors=counts[BINS + 1],
            fec_bins=tuple(counts[:BINS]),
        )

    def noise(self, t: int) -> float:
        """A deterministic draw in [-1, 1) for the second of ``t`` (the same for every reader)."""
        h = (self._noise_key ^ (t // 1_000_000_000) * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        h = (h ^ (h >> 31)) * 0xBF58476D1CE4E5B9 & 0xFFFFFFFFFFFFFFFF
        return ((h ^ (h >> 29)) / 2**63) - 1.0

    def failure_at(self, t: int) -> int | None:
        """When, from ``t`` on and with the faults now in force, the optic fails (None: never)."""
        if self.down():
            return None
        times: list[float] = []
        margin = loss_to_fail(self.base_log_ber) - self.loss_db(t)
        rate = sum(f for k, _, f in self.faults.values() if k == "degrade")
        if margin <= 0:
            times.append(t)
        elif rate > 0:
            times.append(t + margin / rate * 3.6e12)
        aging = sum(f for k, _, f in self.faults.values() if k == "aging")
        headroom = BIAS_FAIL_MA - self.bias_ma(t)
        if headroom <= 0:
            times.append(t)
        elif aging > 0:
            times.append(t + headroom / aging * 3.6e12)
        return math.ceil(min(times)) if times else None


class OpticsBook:
    """The optics of every cabled port of a fabric, keyed by (switch, port)."""

    def __init__(self, fabric: Fabric, seed: int, origin_ns: int) -> None:
        self.ports: dict[tuple[str, str], PortOptic] = {}
        for name, sw in fabric.switches.items():
            for p in fabric.ports(name):
                if p.peer is None:
                    continue
                rng = random.Random(f"optic:{seed}:{name}:{p.name}")
                component = f"xcvr-{p.number}"
                self.ports[(name, p.name)] = PortOptic(p.name, component, sw.speed_gbps * 10**9, origin_ns, rng)

    def of(self, switch: str, port: str) -> PortOptic:
        """One port's optic (KeyError: not a cabled port)."""
        return self.ports[(switch, port)]

    def read(self, switch: str, ports: list[str], t: int) -> list[OpticReading]:
        """The readings of ``switch``'s ``ports`` that have an optic, at ``t``."""
        found = (self.ports.get((switch, p)) for p in ports)
        return [o.read(t, MODULE_THRESHOLDS) for o in found if o is not None]

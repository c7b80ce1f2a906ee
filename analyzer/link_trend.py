"""The arithmetic of link health: predicted frame loss from FEC bins, and robust trends.

**Predicted FLR** (the SONiC/Microsoft algorithm). Over an interval, ``n_k`` codewords had ``k``
symbol errors (bins S0..S15: the deltas of ``SAI_PORT_STAT_IF_IN_FEC_CODEWORD_ERRORS_Sk``). The
codeword-error ratio of bin ``k`` is ``CER_k = n_k / N`` with ``N`` every codeword counted. A
straight line is fitted (least squares) to ``log10 CER_k`` over the bins 1..15 that counted
anything, and extrapolated past what RS(544,514) corrects: the predicted uncorrectable ratio is
``sum_{k>=16} 10^(a + b k) = 10^(a + 16 b) / (1 - 10^b)`` (a geometric series; it converges
because a healthy or degrading link has ``b < 0``). With interleaving ``X`` the frame loss ratio
is ``1 - (1 - CER)^X``. Fewer than two bins with counts, or a slope that does not fall, give no
prediction (None): too little evidence, never a guess.

**Trends** are Theil-Sen fits (the median of the pairwise slopes; robust to a third of the
points being outliers, such as a FEC burst), with a confidence from how consistently the
pairwise slopes agree in sign, how much of the window they cover, and how far the change stands
out of the scatter. :func:`time_to_threshold` says
when the fitted line crosses a threshold, from the last point.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

#: The fitted change over the window must be this many robust standard deviations of the scatter
#: around the line for full confidence.
SIGNAL_SIGMAS = 6.0
#: A trend of fewer points than this is trusted in proportion (a 6 h window in buckets gives 60).
FULL_POINTS = 30
#: Bins of a histogram: S0..S15 (RS(544,514) corrects up to 15 symbols).
BINS = 16
FIRST_UNCORRECTABLE = 16


@dataclass(frozen=True, slots=True)
class LineFit:
    """``y = intercept + slope * x``."""

    intercept: float
    slope: float

    def at(self, x: float) -> float:
        return self.intercept + self.slope * x


def least_squares(xs: Sequence[float], ys: Sequence[float]) -> LineFit | None:
    """Ordinary least squares; None with fewer than two distinct x."""
    n = len(xs)
    if n < 2 or len(set(xs)) < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx
    return LineFit(my - slope * mx, slope)


def predicted_flr(bins: Sequence[int], interleave: int = 1) -> float | None:
    """Predicted post-FEC frame loss ratio from codeword counts per symbol-error bin (S0..S15)."""
    if len(bins) != BINS or any(b < 0 for b in bins):
        return None
    total = sum(bins)
    if total <= 0:
        return None
    xs = [float(k) for k in range(1, BINS) if bins[k] > 0]
    ys = [math.log10(bins[k] / total) for k in range(1, BINS) if bins[k] > 0]
    fit = least_squares(xs, ys)
    if fit is None or fit.slope >= 0:
        return None
    cer = min(1.0, 10 ** fit.at(FIRST_UNCORRECTABLE) / (1 - 10**fit.slope))
    return -math.expm1(interleave * math.log1p(-cer)) if cer < 1 else 1.0  # 1 - (1 - CER)^X, exact for tiny CER


@dataclass(frozen=True, slots=True)
class Trend:
    """A robust line through (seconds, value) points, with how far to trust it."""

    fit: LineFit
    confidence: float  # 0..1
    last_t: float
    points: int


def theil_sen(ts: Sequence[float], ys: Sequence[float]) -> LineFit | None:
    """Median of pairwise slopes; intercept the median of ``y - slope t``. None: < 2 distinct t."""
    slopes = _slopes(ts, ys)
    return None if not slopes else _fit(ts, ys, _median(slopes))


def _slopes(ts: Sequence[float], ys: Sequence[float]) -> list[float]:
    n = len(ts)
    return [(ys[j] - ys[i]) / (ts[j] - ts[i]) for i in range(n) for j in range(i + 1, n) if ts[j] != ts[i]]


def _fit(ts: Sequence[float], ys: Sequence[float], slope: float) -> LineFit:
    return LineFit(_median([y - slope * t for t, y in zip(ts, ys, strict=True)]), slope)


def trend(ts: Sequence[float], ys: Sequence[float], window_s: float) -> Trend | None:
    """Theil-Sen trend of at most 60 points (evenly thinned) with its confidence.

    Confidence = agreement x coverage x size x signal, each in [0, 1]: the share of pairwise
    slopes with the fit's sign; the span covered / ``window_s``; ``points / FULL_POINTS`` (a dozen
    noisy points agree by chance far too often); and how far the
    fitted change over the span stands out of the scatter around the line,
    ``min(1, |slope x span| / (SIGNAL_SIGMAS x sigma))`` with ``sigma`` = 1.4826 x the median
    absolute residual (robust; a perfect line has sigma 0 and signal 1). A consistent trend over
    the whole window is near 1; a step (at most half the pairs cross it), a burst, noise, or a few
    minutes of data are not.
    """
    pts = sorted(zip(ts, ys, strict=True))
    if len(pts) > 60:
        step = (len(pts) - 1) / 59
        pts = [pts[round(i * step)] for i in range(60)]
    if len(pts) < 3:
        return None
    t, y = [p[0] for p in pts], [p[1] for p in pts]
    slopes = _slopes(t, y)
    if not slopes:
        return None
    slopes.sort()
    n = len(slopes)
    fit = _fit(t, y, slopes[n // 2] if n % 2 else (slopes[n // 2 - 1] + slopes[n // 2]) / 2)
    sign = 1 if fit.slope > 0 else -1 if fit.slope < 0 else 0
    agree = (bisect_left(slopes, 0.0) if sign < 0 else n - bisect_right(slopes, 0.0)) / n if sign else 0.0
    coverage = min(1.0, (t[-1] - t[0]) / window_s) if window_s > 0 else 1.0
    sigma = 1.4826 * _median([abs(v - fit.at(x)) for x, v in zip(t, y, strict=True)])
    change = abs(fit.slope * (t[-1] - t[0]))
    signal = 1.0 if sigma == 0 else min(1.0, change / (SIGNAL_SIGMAS * sigma))
    size = min(1.0, len(t) / FULL_POINTS)
    return Trend(fit, round(agree * coverage * size * signal, 3), t[-1], len(t))


def time_to_threshold(tr: Trend, threshold: float, *, falling: bool) -> float | None:
    """Seconds from the last point until the fitted line crosses ``threshold`` (0: crossed already).

    ``falling``: the value is bad when it drops below the threshold (rx power); else when it
    rises above it (BER, bias). None when the line moves away from the threshold or is flat.
    """
    now = tr.fit.at(tr.last_t)
    if (now <= threshold) if falling else (now >= threshold):
        return 0.0
    if (tr.fit.slope >= 0) if falling else (tr.fit.slope <= 0):
        return None
    return (threshold - now) / tr.fit.slope


def _median(values: Sequence[float]) -> float:
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2

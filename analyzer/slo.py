"""The stability and bandwidth models of FABRIC.md, as pure functions.

* Interruption: with per-GPU monthly availability ``a``, a job on ``N`` GPUs runs ``m``
  months without interruption with probability ``a^(N·m)``, so
  ``p_interrupt = 1 - a^(N·m)`` (0.9999 on 8,000 GPUs for a month: 55.1%).
* Scaling efficiency: with per-GPU AllReduce bandwidth ``B`` in GB/s,
  ``efficiency = 1 / (1 + k/B)``. FABRIC.md's two points are 5 GB/s → 0.70 and
  20 GB/s → 0.90; they alone would need k = 2.143 and k = 2.222. The least-squares fit over
  both is k = 2.155; we keep FABRIC.md's k = 2.14, which meets both points within 0.004
  (0.7003 and 0.9034).
* Efficiency loss: the fraction of training speed lost when the live bandwidth falls short
  of the design's, ``1 - efficiency(live) / efficiency(design)``.

No I/O here: callers bring the numbers. Bad inputs raise :class:`SloInputError`, a
``ValueError`` that the command line reports as one line.
"""

from __future__ import annotations

import math

from fabric.errors import FabricmonError

#: k in ``efficiency = 1 / (1 + k/B)``, in GB/s (FABRIC.md).
K_BANDWIDTH = 2.14


class SloInputError(FabricmonError, ValueError):
    """An availability, GPU count, duration or bandwidth outside the model's domain."""


def p_interrupt(availability: float, gpus: int, months: float = 1.0) -> float:
    """Probability that a job on ``gpus`` GPUs is interrupted within ``months``: ``1 - a^(N·m)``."""
    if isinstance(availability, bool) or not 0.0 < availability <= 1.0:
        raise SloInputError(f"availability must be in (0, 1], got {availability!r}")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise SloInputError(f"gpus must be an integer >= 1, got {gpus!r}")
    if not months > 0.0 or math.isinf(months):
        raise SloInputError(f"months must be a finite number > 0, got {months!r}")
    # -expm1(x·ln a) keeps precision when a is within 1e-9 of 1
    return -math.expm1(gpus * months * math.log(availability))


def scaling_efficiency(bandwidth_gbyte_s: float, k: float = K_BANDWIDTH) -> float:
    """Training scaling efficiency at per-GPU AllReduce bandwidth ``B`` GB/s: ``1 / (1 + k/B)``."""
    if not bandwidth_gbyte_s >= 0.0:
        raise SloInputError(f"bandwidth must be >= 0 GB/s, got {bandwidth_gbyte_s!r}")
    if not k > 0.0:
        raise SloInputError(f"k must be > 0 GB/s, got {k!r}")
    if bandwidth_gbyte_s == 0.0:
        return 0.0
    return 1.0 / (1.0 + k / bandwidth_gbyte_s)


def efficiency_loss(design_gbyte_s: float, live_gbyte_s: float, k: float = K_BANDWIDTH) -> float:
    """Fraction of training speed lost (0..1) when per-GPU bandwidth drops from design to live.

    Live bandwidth at or above the design's loses nothing (0.0); no bandwidth loses all (1.0).
    """
    if not design_gbyte_s > 0.0:
        raise SloInputError(f"design bandwidth must be > 0 GB/s, got {design_gbyte_s!r}")
    live = scaling_efficiency(live_gbyte_s, k)
    design = scaling_efficiency(design_gbyte_s, k)
    return max(0.0, 1.0 - live / design)

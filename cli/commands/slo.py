"""``fabricmon slo``: the interruption model of FABRIC.md, ``p_interrupt = 1 - a^(N·months)``."""

from __future__ import annotations

import argparse

from analyzer.slo import p_interrupt
from cli.output import emit


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """Add ``slo`` to the command line."""
    p = sub.add_parser(
        "slo",
        parents=[common],
        help="probability that a job on N GPUs is interrupted (1 - a^N per month)",
        description="With per-GPU monthly availability A, a job on N GPUs is interrupted within "
        "M months with probability 1 - A^(N*M).",
    )
    p.add_argument("--gpus", type=int, required=True, metavar="N", help="GPUs the job runs on")
    p.add_argument(
        "--availability", type=float, required=True, metavar="A", help="per-GPU monthly availability (0.9999)"
    )
    p.add_argument("--months", type=float, default=1.0, metavar="M", help="job duration in months (1)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the interruption probability; bad values raise SloInputError (one line, exit 2)."""
    p = p_interrupt(args.availability, args.gpus, args.months)
    data = {
        "gpus": args.gpus,
        "availability": args.availability,
        "months": args.months,
        "p_interrupt": p,
        "p_interrupt_pct": round(p * 100.0, 6),
    }
    months = f"{args.months:g} month" + ("" if args.months == 1 else "s")
    emit(args.json, data, f"P(interrupt within {months}) = {format_pct(p)}")
    return 0


def format_pct(p: float) -> str:
    """A probability as a percentage with one decimal, more when that would round to 0% or 100%."""
    pct = p * 100.0
    for decimals in range(1, 7):
        text = f"{pct:.{decimals}f}"
        if 0.0 < pct < 100.0 and float(text) in (0.0, 100.0):
            continue
        return f"{text}%"
    return f"{pct:.6g}%"

"""Slurm host lists: ``srv-g1-[001-004,007],login1`` <-> the names they stand for.

Slurm writes node sets compactly (``squeue``'s ``nodes``, ``scontrol``'s ``NodeName=``): a
comma-separated list of names, each of which may hold bracket groups of numbers and ranges. A
range keeps the width of its first bound (``[08-10]`` is ``08 09 10``); several groups in one
name multiply (``r[1-2]n[1-2]`` is four names). :func:`expand` refuses anything else with
:class:`HostlistError` rather than guess, and refuses lists that stand for more than
``limit`` names (a job never spans more nodes than the fabric has). :func:`compress` is the
inverse for names that end in a number, used only to keep commands and logs short.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from itertools import product

from fabric.errors import FabricmonError

#: More names than any fabric fabricmon judges has servers.
MAX_NAMES = 1_000_000
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_TAIL_NUMBER = re.compile(r"^(.*?)(\d+)$")


class HostlistError(FabricmonError, ValueError):
    """A host list that is not Slurm's syntax, or too large."""


def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise HostlistError(f"nested brackets in host list {text!r}")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"unbalanced ']' in host list {text!r}")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise HostlistError(f"unbalanced '[' in host list {text!r}")
    parts.append(text[start:])
    return parts


def _group(body: str, whole: str) -> list[str]:
    """The values of one bracket group's body: ``001-004,007``."""
    out: list[str] = []
    for item in body.split(","):
        m = _RANGE.match(item.strip())
        if not m:
            raise HostlistError(f"bad range {item!r} in host list {whole!r}")
        lo, hi = m.group(1), m.group(2)
        if hi is None:
            out.append(lo)
            continue
        a, b = int(lo), int(hi)
        if b < a:
            raise HostlistError(f"descending range {item!r} in host list {whole!r}")
        if b - a >= MAX_NAMES:
            raise HostlistError(f"range {item!r} in host list {whole!r} is too large")
        width = len(lo)
        out.extend(str(n).zfill(width) for n in range(a, b + 1))
    return out


def expand(text: str, limit: int = MAX_NAMES) -> list[str]:
    """The node names a Slurm host list stands for, in order, repeats dropped."""
    text = text.strip()
    if not text or text in ("(null)", "None"):
        return []
    names: dict[str, None] = {}
    for part in _split_top(text):
        part = part.strip()
        if not part:
            raise HostlistError(f"empty name in host list {text!r}")
        pieces = re.split(r"\[([^\]]*)\]", part)  # literal, group, literal, group, ..., literal
        choices: list[list[str]] = []
        total = 1
        for i, piece in enumerate(pieces):
            if i % 2:
                values = _group(piece, text)
                total *= len(values)
                if total > limit:
                    raise HostlistError(f"host list {text!r} stands for more than {limit:,} names")
                choices.append(values)
            else:
                if any(c in piece for c in "[], \t"):
                    raise HostlistError(f"bad name {part!r} in host list {text!r}")
                choices.append([piece])
        for combo in product(*choices):
            names["".join(combo)] = None
            if len(names) > limit:
                raise HostlistError(f"host list {text!r} stands for more than {limit:,} names")
    return list(names)


def compress(names: Iterable[str]) -> str:
    """A Slurm host list for ``names`` (sorted; runs of numbers of one width become ranges)."""
    groups: dict[tuple[str, int], list[int]] = {}
    plain: list[str] = []
    for name in dict.fromkeys(names):
        m = _TAIL_NUMBER.match(name)
        if m is None or any(c in name for c in "[],"):
            plain.append(name)
            continue
        groups.setdefault((m.group(1), len(m.group(2))), []).append(int(m.group(2)))
    parts = sorted(plain)
    for (prefix, width), numbers in sorted(groups.items()):
        numbers.sort()
        if len(numbers) == 1:
            parts.append(f"{prefix}{numbers[0]:0{width}d}")
            continue
        runs: list[str] = []
        start = prev = numbers[0]
        for n in [*numbers[1:], None]:
            if n is not None and n == prev + 1 and len(str(n)) <= width:
                prev = n
                continue
            runs.append(f"{start:0{width}d}" if start == prev else f"{start:0{width}d}-{prev:0{width}d}")
            if n is not None:
                start = prev = n
        parts.append(f"{prefix}[{','.join(runs)}]")
    return ",".join(parts)


__all__ = ["HostlistError", "compress", "expand"]

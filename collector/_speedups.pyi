from collections.abc import Sequence
from typing import Any

def fast_values(updates: Sequence[bytes], slots: dict[bytes, Any], row: list[Any], /) -> int: ...
def optics_pairs(updates: Sequence[bytes], acts: dict[bytes, Any], /) -> list[tuple[Any, int | float]] | None: ...
def optics_slots(
    updates: Sequence[bytes], layout: dict[bytes, int], bounds: tuple[tuple[float, float], ...], /
) -> list[int | float | None] | None: ...
def optics_note(raw: bytes, plans: dict[bytes, Any], /) -> tuple[int, Any, list[int | float | None], int] | None: ...
def deltas(
    vals: list[Any],
    times: list[int],
    values: tuple[int | None, ...],
    t: int,
    wrap32: frozenset[str],
    reset: bool,
    names: tuple[str, ...],
    carrier: int,
    /,
) -> tuple[dict[str, tuple[int, float]], int | None, bool, int, int, int] | None: ...
def port_row(
    cls: type[tuple[Any, ...]],
    time: Any,
    switch: str,
    port: str,
    oper: int | None,
    speed: int | None,
    values: tuple[int | None, ...],
    deltas: dict[str, tuple[int, float]] | None,
    max_bps: float,
    max_pps: float,
    reset: bool,
    names: tuple[str, ...],
    rate_names: tuple[str, ...],
    /,
) -> tuple[Any, int] | None: ...

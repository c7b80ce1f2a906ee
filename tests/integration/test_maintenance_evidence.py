"""A planned leaf reboot's link events, on a real TimescaleDB, judged after its window ended: the
flap and outage checks leave them out (no ``switch_flapping``, no training-fatal outage, no
drain), while the same events with no window, or a link outside it, are judged as always."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg

from analyzer.actions import ActionPolicy, decide_all
from analyzer.config import AnalyzerConfig
from analyzer.correlation import correlate
from analyzer.coverage import coverage
from analyzer.engine import context_for, lookback_s
from analyzer.maintenance import Window, add_window, windows_between
from analyzer.stability import check_errors, check_flaps, check_outages
from fabric.model import FabricParams
from fabric.topology import build_aipod
from store.inventory import ensure_fabric

FABRIC = build_aipod(FabricParams(gpus=512, radix=64))
LEAF = "lf-g1-r2"
CONFIG = AnalyzerConfig()  # flap_window_s 300, fatal_outage_s 7
INTERVAL_S = 10.0


async def reboot_events(pool: asyncpg.Pool, at: datetime, down_s: float = 40.0, ports: list[str] | None = None) -> None:
    """Every cabled port of the leaf (or ``ports``) down at ``at`` and up ``down_s`` later, as the
    collector writes it."""
    ports = ports or [p.name for p in FABRIC.ports(LEAF) if p.peer is not None]
    rows: list[tuple[datetime, str, str, str, str, float | None]] = [(at, LEAF, p, "up", "down", None) for p in ports]
    rows += [(at + timedelta(seconds=down_s), LEAF, p, "down", "up", down_s) for p in ports]
    await pool.executemany(
        "INSERT INTO link_events (time, switch, port, old_status, new_status, down_s) VALUES ($1, $2, $3, $4, $5, $6)",
        rows,
    )


async def judged(pool: asyncpg.Pool, now: datetime) -> list:  # type: ignore[type-arg]
    since = now - timedelta(seconds=lookback_s(CONFIG, INTERVAL_S))
    async with pool.acquire() as conn:
        cover = coverage(await windows_between(conn, since, now), FABRIC)
        ctx = context_for(FABRIC, CONFIG, now, INTERVAL_S, cover)
        return [*await check_flaps(conn, ctx), *await check_outages(conn, ctx)]


async def test_a_reboot_inside_an_ended_window_is_no_flap_and_no_outage_afterwards(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        await ensure_fabric(conn, FABRIC)
    now = datetime.now(UTC)
    reboot_at = now - timedelta(seconds=120)
    await reboot_events(pool, reboot_at)

    # no window: the reboot is judged for flap_window_s: the leaf flapped, its links had a fatal
    # outage, one incident about a leaf that is fine again
    found = await judged(pool, now)
    assert {f.rule for f in found} >= {"switch_flapping", "link_outage"}, [(f.rule, f.key) for f in found]
    assert [i.key for i in correlate(found, FABRIC)] == [f"switch:{LEAF}"]

    # a window on the leaf from before the reboot to 30 s ago (over now): nothing left to judge
    await add_window(pool, Window(None, (LEAF,), (), (), reboot_at - timedelta(minutes=5), now - timedelta(seconds=30)))
    assert await judged(pool, now) == []

    # a window on another leaf, or one that ended before the reboot, hides nothing
    await pool.execute("DELETE FROM maintenance_windows")
    await add_window(pool, Window(None, ("lf-g1-r3",), (), (), reboot_at - timedelta(minutes=5), now))
    await add_window(pool, Window(None, (LEAF,), (), (), reboot_at - timedelta(minutes=5), reboot_at))
    assert {f.rule for f in await judged(pool, now)} >= {"switch_flapping", "link_outage"}


async def test_a_server_reboot_inside_an_ended_window_does_not_drain_it_afterwards(pool: asyncpg.Pool) -> None:
    """A server rebooted in its window (a Slurm MAINT reservation): its NIC link was down past the
    fatal outage. Judged afterwards with no window, that is a drain of the server ("down past the
    fatal outage; up again"), minutes after the planned work ended."""
    async with pool.acquire() as conn:
        await ensure_fabric(conn, FABRIC)
    now = datetime.now(UTC)
    reboot_at = now - timedelta(seconds=120)
    server = "srv-g1-007"
    port = next(p.name for p in FABRIC.ports(LEAF) if p.peer is not None and p.peer.node == server)
    await reboot_events(pool, reboot_at, ports=[port])
    policy = ActionPolicy()
    (inc,) = decide_all(correlate(await judged(pool, now), FABRIC), FABRIC, policy)
    assert (inc.action, inc.action_hosts) == ("drain", (server,))
    await add_window(
        pool, Window(None, (), (server,), (), reboot_at - timedelta(minutes=1), now - timedelta(seconds=60))
    )
    assert await judged(pool, now) == []


async def test_error_counts_inside_a_window_are_left_out(pool: asyncpg.Pool) -> None:
    """FCS errors on a leaf port while its optics are reseated in a window: no ``error_rate``;
    the same errors after the window (or on another leaf) are judged."""
    async with pool.acquire() as conn:
        await ensure_fabric(conn, FABRIC)
    now = datetime.now(UTC)
    port = next(p.name for p in FABRIC.ports(LEAF) if p.peer is not None)
    rows = [
        (now - timedelta(seconds=s), LEAF, port, 1, 10.0, 5.0, 0.0, 1000.0)
        for s in (5, 15, 25)  # 5 errors/s: 18,000/h, far over 120/h
    ]
    await pool.executemany(
        """INSERT INTO port_counters (time, switch, port, oper_status, interval_s, in_fcs_errors_ps, in_discards_ps,
                                      in_pps) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)""",
        rows,
    )

    async def errors() -> list[str]:
        async with pool.acquire() as conn:
            cover = coverage(await windows_between(conn, now - timedelta(minutes=10), now), FABRIC)
            ctx = context_for(FABRIC, CONFIG, now, INTERVAL_S, cover)
            return [f.key for f in await check_errors(conn, ctx)]

    assert await errors() == [f"{LEAF}:{port}"]
    await add_window(pool, Window(None, (LEAF,), (), (), now - timedelta(minutes=5), now + timedelta(minutes=5)))
    assert await errors() == []
    await pool.execute("DELETE FROM maintenance_windows")
    await add_window(pool, Window(None, (LEAF,), (), (), now - timedelta(minutes=5), now - timedelta(seconds=20)))
    assert await errors() == [f"{LEAF}:{port}"]  # the samples after the window still count

"""Slurm MAINT reservations on a real slurmctld (munged, slurmctld and three slurmd on loopback;
tests/support/slurm.py) become maintenance windows in a real TimescaleDB, and an incident on a
reserved node is then observed, not drained.

Reservations are made and removed with ``scontrol`` as an admin would; fabricmon reads them
through its own poller (:class:`schedulers.maintenance.SlurmMaintenance`, ``scontrol -o show
reservation`` under ``TZ=UTC``). The windows are read back through the API's store functions."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import asyncpg
import pytest

from analyzer.actions import ActionPolicy, decide_all
from analyzer.correlation import correlate
from analyzer.coverage import coverage, mark
from analyzer.findings import Finding
from analyzer.links import links_scope
from analyzer.maintenance import list_windows, windows_between
from fabric.model import FabricParams
from fabric.topology import build_aipod
from schedulers.config import SlurmConfig
from schedulers.maintenance import SlurmMaintenance
from schedulers.slurm import SlurmUnavailable
from tests.support.slurm import SlurmCluster, missing_programs, slurm_cluster

pytestmark = [
    pytest.mark.db,
    pytest.mark.skipif(
        bool(missing_programs()),
        reason=f"Slurm is not installed ({', '.join(missing_programs())}): make setup installs "
        "Debian's slurmctld, slurmd, slurm-client and munge",
    ),
]

FABRIC = build_aipod(FabricParams(gpus=1024))
NODES = ("srv-g1-001", "srv-g1-002", "cpu-login-1")  # the last one is no fabric server


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    with slurm_cluster(tmp_path_factory.mktemp("slurm-maint"), NODES) as c:
        yield c


#: scontrol prints times in its own time zone, without saying which: fabricmon asks for UTC. The
#: test process and the admin's scontrol run in another zone, so a reading in local time would be
#: 5.5 h off.
ZONE = "Asia/Kolkata"


def poller(pool: asyncpg.Pool, c: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> SlurmMaintenance:
    monkeypatch.setenv("TZ", ZONE)  # SlurmCommands takes the process environment
    config = SlurmConfig.model_validate({"slurm_conf": c.conf, "command_timeout_s": 20})
    return SlurmMaintenance(pool, config, FABRIC.servers)


def times_of(c: SlurmCluster, name: str) -> tuple[datetime, datetime]:
    """The reservation's start and end as Slurm itself prints them to an admin in :data:`ZONE`."""
    c.env["TZ"] = ZONE
    text = c.run("scontrol", "-o", "show", "reservation", name)
    found = re.findall(r"(StartTime|EndTime)=(\S+)", text)
    local = {k: datetime.fromisoformat(v).replace(tzinfo=ZoneInfo(ZONE)) for k, v in found}
    return local["StartTime"], local["EndTime"]


def nic_link_down(server: str) -> Finding:
    """srv-g1-00N's rail-1 NIC link down past the fatal outage: a drain, outside a window."""
    leaf = "lf-g1-r1"
    port = next(p.name for p in FABRIC.ports(leaf) if p.peer is not None and p.peer.node == server)
    return Finding(
        "link_outage", f"{leaf}:{port}", "critical", f"{leaf}:{port} down", links_scope(FABRIC, [(leaf, port)]),
        {"down_now": True, "down_for_s": 30.0},
    )  # fmt: skip


async def test_a_maint_reservation_opens_a_window_for_its_nodes_and_closes_when_deleted(
    pool: asyncpg.Pool, cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster.run(
        "scontrol", "create", "reservation", "reservationname=rack7", "starttime=now", "duration=120",
        "nodes=srv-g1-[001-002],cpu-login-1", "flags=maint", "users=root",
    )  # fmt: skip
    cluster.run(
        "scontrol", "create", "reservation", "reservationname=later", "starttime=now+7200", "duration=60",
        "nodes=srv-g1-001", "flags=maint", "users=root",
    )  # fmt: skip
    cluster.run(
        "scontrol", "create", "reservation", "reservationname=training", "starttime=now", "duration=60",
        "nodes=srv-g1-002", "users=root",
    )  # fmt: skip
    maint = poller(pool, cluster, monkeypatch)
    now = datetime.now(UTC)
    assert await maint.poll_once(now) == (2, 0)
    windows, total = await list_windows(pool, now)
    by_source = {w.source: w for w in windows}
    assert total == 2 and set(by_source) == {"slurm:rack7", "slurm:later"}  # a plain reservation is no window
    rack = by_source["slurm:rack7"]
    assert rack.servers == ("srv-g1-001", "srv-g1-002") and rack.switches == () and rack.rails == ()  # no CPU node
    assert (rack.start, rack.end) == times_of(cluster, "rack7") and rack.active(now)
    assert "MAINT" in rack.reason and not by_source["slurm:later"].active(now)
    assert (await list_windows(pool, now, active=True))[0] == [rack]

    # inside the window, a NIC of a reserved node losing its link is observed, not drained
    decided = decide_all(correlate([nic_link_down("srv-g1-001")], FABRIC), FABRIC, ActionPolicy(max_drain_hosts=8))
    assert [i.action for i in decided] == ["drain"]
    (inc,) = mark(decided, coverage(await windows_between(pool, now, now), FABRIC), now)
    assert (inc.maintenance, inc.action, inc.action_hosts, inc.windows) == (True, "observe", (), (rack.id,))
    assert inc.severity == "warning" and "rack7" in inc.reason

    # polling again changes nothing; a changed reservation changes its window
    assert await maint.poll_once(now) == (2, 0)
    cluster.run("scontrol", "update", "reservationname=rack7", "nodes=srv-g1-001")
    await maint.poll_once(now)
    (rack,) = [w for w in (await list_windows(pool, now))[0] if w.source == "slurm:rack7"]
    assert rack.servers == ("srv-g1-001",)

    # deleted in Slurm: the started window ends now (kept for the analyzer's look-back), the
    # future one goes
    cluster.run("scontrol", "delete", "reservation=rack7")
    cluster.run("scontrol", "delete", "reservation=later")
    cluster.run("scontrol", "delete", "reservation=training")
    later = datetime.now(UTC)
    assert await maint.poll_once(later) == (0, 2)
    assert (await list_windows(pool, later, active=True))[0] == []
    (ended,) = (await list_windows(pool, later))[0]
    assert ended.source == "slurm:rack7" and ended.end == later
    (inc,) = mark(decided, coverage(await windows_between(pool, later, later), FABRIC), later)
    assert (inc.maintenance, inc.action) == (False, "drain")  # outside the window: acted on again


async def test_slurmctld_away_keeps_the_last_windows(
    pool: asyncpg.Pool, cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster.run(
        "scontrol", "create", "reservation", "reservationname=away", "starttime=now", "duration=60",
        "nodes=srv-g1-002", "flags=maint", "users=root",
    )  # fmt: skip
    maint = poller(pool, cluster, monkeypatch)
    now = datetime.now(UTC)
    try:
        assert await maint.poll_once(now) == (1, 0)
        cluster.stop_ctld()
        with pytest.raises(SlurmUnavailable):
            await maint.poll_once(now + timedelta(seconds=1))
        assert [w.source for w in (await list_windows(pool, now, active=True))[0]] == ["slurm:away"]
    finally:
        if "slurmctld" not in cluster.procs:
            cluster.start_ctld()
        cluster.run("scontrol", "delete", "reservation=away")

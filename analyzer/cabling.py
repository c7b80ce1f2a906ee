"""Cabling against the design, from the LLDP neighbours the switches report.

GPU *k* of every server must land on leaf *k* of its group (its rail); every leaf uplink on a
spine of the leaf's own rail. Each wrong cable becomes one ``miswire`` finding that names the
server, the GPU, the leaf it should be on and the leaf (and port) it is on: a miswired GPU sends
its rail's traffic into another rail, and NCCL's rail-aligned rings quietly cross the spine
layer instead of staying in the rail.
"""

from __future__ import annotations

from analyzer.context import CheckContext
from analyzer.findings import Finding, blast_radius
from fabric.model import Endpoint, Role
from store.db import Connection

#: The suspects, found in SQL against the stored design (``links``): a leaf seeing a server NIC
#: that the design cables elsewhere, or a spine of another rail. Python then explains each one.
#: At 16K GPUs this returns a handful of rows instead of 33K. A server's NIC is named by the
#: port id or, as lldpd sends it by default (the port id a MAC), by the port description.
_SQL = """
SELECT n.switch, n.port, n.system_name, l.a_port AS nic, n.port_id, n.seen_at
FROM lldp_neighbors n
JOIN switches s ON s.name = n.switch AND s.role = 'leaf'
LEFT JOIN links l ON l.a_node = n.system_name AND l.a_port IN (n.port_id, n.port_description)
                 AND l.kind = 'server-leaf'
LEFT JOIN switches r ON r.name = n.system_name
WHERE (l.a_node IS NOT NULL AND (l.b_node <> n.switch OR l.b_port <> n.port))
   OR (r.role = 'spine' AND r.rail IS DISTINCT FROM s.rail)
"""


async def check_cabling(conn: Connection, ctx: CheckContext) -> list[Finding]:
    """One ``miswire`` per server NIC on the wrong leaf (or port), and per leaf uplink on another rail."""
    rows = await conn.fetch(_SQL)
    fabric = ctx.fabric
    findings: list[Finding] = []
    for r in rows:
        switch, port, remote, remote_port = r["switch"], r["port"], r["system_name"], r["port_id"]
        local = fabric.switches.get(switch)
        if local is None or local.role is not Role.LEAF:
            continue
        nic = r["nic"]
        gpu = fabric.nic_rail(remote, nic) if nic is not None and remote in fabric.servers else None
        if gpu is not None:
            designed = fabric.peer(Endpoint(remote, nic))
            if designed is None:
                continue
            expected, designed_port = designed.node, designed.port
            if expected == switch and designed_port == port:
                continue
            wrong_leaf = expected != switch
            findings.append(
                Finding(
                    rule="miswire",
                    key=f"{remote}:gpu{gpu}",
                    severity="critical" if wrong_leaf else "warning",
                    summary=(
                        f"{remote} {nic} (GPU {gpu}) is cabled to {switch}:{port}, expected {expected}:{designed_port}"
                        + (
                            f" (rail {local.rail} instead of rail {fabric.switches[expected].rail})"
                            if wrong_leaf
                            else ""
                        )
                    ),
                    scope=blast_radius(fabric, ports=[(switch, port)], gpus=[(remote, gpu)]),
                    details={
                        "server": remote,
                        "gpu": gpu,
                        "nic": nic,
                        "expected_leaf": expected,
                        "expected_port": designed_port,
                        "actual_leaf": switch,
                        "actual_port": port,
                        "seen_at": r["seen_at"].isoformat(),
                    },
                    observed_at=ctx.now,
                )
            )
        elif remote in fabric.switches and fabric.switches[remote].role is Role.SPINE:
            spine = fabric.switches[remote]
            if spine.rail != local.rail:
                findings.append(
                    Finding(
                        rule="miswire",
                        key=f"{switch}:{port}",
                        severity="critical",
                        summary=f"{switch}:{port} (rail {local.rail}) is cabled to {remote} of rail {spine.rail}",
                        scope=blast_radius(fabric, ports=[(switch, port)]),
                        details={
                            "leaf": switch,
                            "port": port,
                            "spine": remote,
                            "spine_port": remote_port,
                            "leaf_rail": local.rail,
                            "spine_rail": spine.rail,
                        },
                        observed_at=ctx.now,
                    )
                )
    return findings

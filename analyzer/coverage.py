"""What maintenance windows cover: which places, at which times (pure: no I/O).

A window (:mod:`analyzer.maintenance`) covers, from its ``start`` (inclusive) to its ``end``
(exclusive):

* each switch it names, and each switch of each rail it names;
* each server it names;
* every link with an end on a covered switch or server, at both ends: rebooting a leaf takes its
  uplinks down at the spines too, and a server's reboot takes its NIC links down at its leaves.

Two uses, both only on covered places:

* **Incidents** (:func:`mark`). An incident whose root cause is on a place covered now is
  marked ``maintenance``: action ``observe`` (never drain or checkpoint), no review, severity
  warning (info when every finding is info). The root cause's place is a switch incident's
  switch, a link incident's link (either end), and otherwise the root's switch, port, server or
  rail. Only the root counts, not the blast radius: a PFC storm born on a leaf outside the window
  pauses spines inside it, and it is still that leaf's fault, acted on as always. Our own
  collection is never in maintenance.
* **Evidence** (:meth:`Coverage.event_covered`, :meth:`Coverage.span_covered`,
  :meth:`Coverage.exclusions`). Link events, outages and error counts on a covered link, at a
  time inside the window, are not judged, during the window or after it: a planned reboot's
  down/up transitions would otherwise be a ``switch_flapping`` and a training-fatal outage for the
  next ``flap_window_s``, and drain the leaf's hosts once the window has ended. What a link does
  after the window (still down, flapping again) is judged as always.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from analyzer.incident_model import Incident, with_decision
from analyzer.maintenance import Window
from fabric.model import Endpoint, Fabric

#: (start, end, window id) of one window on one place.
Span = tuple[datetime, datetime, int]


@dataclass(frozen=True, slots=True)
class Coverage:
    """Per place, the windows on it; built once per evaluation by :func:`coverage`."""

    fabric: Fabric
    windows: tuple[Window, ...] = ()
    switches: dict[str, list[Span]] = field(default_factory=dict)
    servers: dict[str, list[Span]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.switches or self.servers)

    def node_spans(self, node: str) -> list[Span]:
        """The windows on a switch or server."""
        return self.switches.get(node) or self.servers.get(node) or []

    def port_spans(self, switch: str, port: str) -> list[Span]:
        """The windows on the link at ``switch:port``: on its switch, or on the far end's node."""
        spans = list(self.switches.get(switch, ()))
        peer = self.fabric.peer(Endpoint(switch, port))
        if peer is not None:
            spans += self.node_spans(peer.node)
        return spans

    def event_covered(self, switch: str, port: str, t: datetime) -> bool:
        """Whether a link event at ``switch:port`` at ``t`` happened inside a window on that link."""
        return bool(self) and any(s <= t < e for s, e, _ in self.port_spans(switch, port))

    def span_covered(self, switch: str, port: str, t0: datetime, t1: datetime) -> bool:
        """Whether ``[t0, t1]`` on the link at ``switch:port`` meets a window on it (an outage that
        began or ended inside the maintenance is the maintenance's)."""
        return bool(self) and any(s <= t1 and t0 < e for s, e, _ in self.port_spans(switch, port))

    def exclusions(self) -> tuple[list[str], list[str | None], list[datetime], list[datetime]]:
        """The covered ports as SQL arrays (switch, port or None for every port, start, end): each
        covered switch, and the far ends of its links and of covered servers' NIC links."""
        out: list[tuple[str, str | None, datetime, datetime]] = []
        for name, spans in sorted(self.switches.items()):
            if name not in self.fabric.switches:
                continue
            far = [p.peer for p in self.fabric.ports(name) if p.peer is not None]
            far = [peer for peer in far if peer.node in self.fabric.switches]
            for s, e, _ in spans:
                out.append((name, None, s, e))
                out += [(peer.node, peer.port, s, e) for peer in far]
        for name, spans in sorted(self.servers.items()):
            server = self.fabric.servers.get(name)
            if server is None:
                continue
            leaves = [p for nic, _ in server.nics if (p := self.fabric.peer(Endpoint(name, nic))) is not None]
            for s, e, _ in spans:
                out += [(leaf.node, leaf.port, s, e) for leaf in leaves]
        return [x[0] for x in out], [x[1] for x in out], [x[2] for x in out], [x[3] for x in out]

    def rail_windows(self, rail: int, now: datetime) -> list[int]:
        """The windows in force that name ``rail``."""
        return [w.id for w in self.windows if w.id is not None and rail in w.rails and w.active(now)]

    def incident_windows(self, inc: Incident, now: datetime) -> tuple[int, ...]:
        """The windows in force that cover ``inc``'s root cause (see the module docstring)."""
        if inc.kind == "collection" or not self:
            return ()
        spans: list[Span] = []
        loc = inc.location
        switch = loc.get("switch") if isinstance(loc.get("switch"), str) else None
        port = loc.get("port") if isinstance(loc.get("port"), str) else None
        if inc.kind == "switch":
            spans += self.switches.get(inc.key.split(":", 1)[1], ())
        elif inc.key.startswith("link:"):
            sw, _, pt = inc.key[len("link:") :].partition(":")
            spans += self.port_spans(sw, pt)
        elif switch is not None and port is not None:
            spans += self.port_spans(switch, port)
        elif switch is not None:
            spans += self.switches.get(switch, ())
        server = loc.get("server")
        if isinstance(server, str):
            spans += self.servers.get(server, ())
        ids = {i for s, e, i in spans if s <= now < e}
        rail = loc.get("rail")
        if isinstance(rail, int) and not isinstance(rail, bool):
            ids.update(self.rail_windows(rail, now))
        return tuple(sorted(ids))


def coverage(windows: Iterable[Window], fabric: Fabric) -> Coverage:
    """What ``windows`` cover in ``fabric`` (names the fabric does not have cover nothing)."""
    kept = tuple(w for w in windows if w.id is not None)
    switches: dict[str, list[Span]] = {}
    servers: dict[str, list[Span]] = {}
    by_rail: dict[int, list[str]] = {}
    for name, sw in fabric.switches.items():
        if sw.rail is not None:
            by_rail.setdefault(sw.rail, []).append(name)
    for w in kept:
        assert w.id is not None
        span = (w.start, w.end, w.id)
        names = set(w.switches) | {s for r in w.rails for s in by_rail.get(r, ())}
        for name in sorted(names):
            if name in fabric.switches:
                switches.setdefault(name, []).append(span)
        for name in w.servers:
            if name in fabric.servers:
                servers.setdefault(name, []).append(span)
    return Coverage(fabric, kept, switches, servers)


def mark(incidents: Sequence[Incident], cover: Coverage, now: datetime) -> list[Incident]:
    """``incidents`` with those whose root cause is covered now marked ``maintenance``: action
    observe, no action hosts, no review, severity warning (info when every finding is info)."""
    out: list[Incident] = []
    for inc in incidents:
        ids = cover.incident_windows(inc, now)
        if not ids:
            out.append(inc)
            continue
        reasons = sorted({w.reason for w in cover.windows if w.id in ids and w.reason})
        why = f" ({'; '.join(reasons)})" if reasons else ""
        named = ", ".join(str(i) for i in ids)
        out.append(
            with_decision(
                inc,
                maintenance=True,
                windows=ids,
                severity="info" if all(f.severity == "info" for f in inc.findings) else "warning",
                action="observe",
                action_hosts=(),
                needs_review=False,
                reason=f"inside maintenance window {named}{why}: observed, not acted on"
                + (f" (otherwise: {inc.action}, {inc.reason})" if inc.action != "observe" or inc.needs_review else ""),
            )
        )
    return out

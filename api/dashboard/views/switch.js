// One switch: its facts, its incidents (open and past) and its ports table with peer, status,
// rates and a sparkline of the last hour's input rate; each port a link to its charts.

import { api, ago, bps, clock, el, link, rate, safeDecode, section, shown, table, td, touches } from "../core.js";
import { sparkline } from "../charts.js";

const enc = encodeURIComponent;

export async function switchView(m) {
  const name = safeDecode(m[1]);
  const [sw, ports, sparks, incidents, health] = await Promise.all([
    api(`/v1/switches/${enc(name)}`), api(`/v1/switches/${enc(name)}/ports?limit=1000`),
    api(`/v1/switches/${enc(name)}/sparklines?metric=in_bps&minutes=60`), api("/v1/incidents?state=all&limit=500"),
    api("/v1/health"),
  ]);
  const mine = incidents.items.filter((a) => touches(a, name));
  const cells = [];
  const rows = ports.items.map((p) => {
    const spark = el("td", { class: "spark" });
    const values = sparks.ports[p.name];
    if (values && values.some((v) => v !== null)) cells.push([spark, values]);
    const up = p.oper_status === "up";
    const peer = p.peer
      ? p.peer.kind && p.peer.kind !== "server-leaf"
        ? link(`#/switch/${enc(p.peer.node)}`, `${p.peer.node}${p.peer.port ? `:${p.peer.port}` : ""}`)
        : `${p.peer.node}${p.peer.port ? `:${p.peer.port}` : ""}`
      : "–";
    return el("tr", { class: p.oper_status === null ? "unknown" : up ? "healthy" : "critical", "data-port": p.name },
      el("td", {}, link(`#/port/${enc(name)}/${enc(p.name)}`, p.name)),
      td(p.direction || "–"), el("td", {}, peer), td(p.oper_status || "no sample", "sev"),
      td(p.speed_bps ? bps(p.speed_bps) : "–", "num"), td(bps(p.in_bps), "num"), td(bps(p.out_bps), "num"), spark,
      td(rate((p.in_errors_ps || 0) + (p.out_errors_ps || 0)), "num"),
      td(rate((p.in_discards_ps || 0) + (p.out_discards_ps || 0)), "num"),
      td(`${rate(p.pfc_rx_pause_pps)} / ${rate(p.pfc_tx_pause_pps)}`, "num"), td(p.flaps_24h, "num"));
  });
  const facts = [
    `${sw.role}`, sw.group !== null ? `group ${sw.group}` : null, sw.rail !== null ? `rail ${sw.rail}` : null,
    `${sw.ports_up}/${sw.ports_total} ports up`, sw.last_sample_at ? `last sample ${ago(sw.last_sample_at)}` : "no sample in the window",
    sw.reachability ? `${sw.reachability.state} since ${clock(sw.reachability.since)}` : null,
    sw.clock_skew_s !== null && sw.clock_skew_s !== undefined ? `clock ${sw.clock_skew_s.toFixed(1)} s off` : null,
  ].filter(Boolean).join(" · ");
  const incRows = mine.map((a) => el("tr", { class: a.severity, "data-alert-id": String(a.id) },
    td(a.state), td(a.severity, "sev"), el("td", {}, link(`#/incident/${a.id}`, a.summary)),
    td(clock(a.started_at), "num"), td(a.ended_at ? clock(a.ended_at) : "open", "num")));
  const nodes = [
    el("div", { class: "page" },
      el("section", { class: "panel wide" },
        el("h2", { class: "named", text: `${name} ` }, el("small", { id: "status", class: shown(sw.status, health.stale),
          text: health.stale ? "stale verdict" : sw.status || "unknown" })),
        el("p", { class: "facts", text: facts }),
        sw.rail !== null ? link(`#/rail/${sw.rail}${sw.group !== null ? `?group=${sw.group}` : ""}`, `rail ${sw.rail} ›`) : null),
      section(`Incidents (${mine.length})`, mine.length
        ? table(["state", "severity", "incident", "started", "ended"], incRows, { id: "switch-incidents" })
        : el("p", { class: "empty", text: "no incident on this switch" })),
      section(`Ports (${ports.items.length})`,
        table(["port", "dir", "peer", "status", "speed", "in b/s", "out b/s", "in, last hour", "errors/s", "discards/s", "PFC rx/tx pps", "flaps 24 h"],
          rows, { id: "ports" }))),
  ];
  const after = [() => { for (const [cell, values] of cells) sparkline(cell, sparks.times, values); }];
  return { nodes, after };
}

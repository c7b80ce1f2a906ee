// One rail: its slice of the map, capacity, load and down:up ratio over time, and its leaves and
// spines (each a link to the switch); ?group=G marks that group's cell and leaf.

import { api, ago, el, gbps, link, pct, section, shown, table, td, touches } from "../core.js";
import { timeChart } from "../charts.js";
import { renderMap } from "../map.js";
import { historyCharts } from "./overview.js";

export async function rail(m, query) {
  const id = Number(m[1]);
  const group = query.get("group");
  const [rails, switches, history, alerts, health] = await Promise.all([
    api("/v1/rails"), api(`/v1/switches?rail=${id}&limit=1000`), api(`/v1/history?rail=${id}`),
    api("/v1/alerts?state=firing&limit=200"), api("/v1/health"),
  ]);
  const stale = health.stale;
  const r = rails.rails.find((x) => x.rail === id);
  if (!r) return { nodes: [el("p", { class: "empty", text: `the fabric has no rail ${id}` })] };
  const map = el("div", { id: "rail-map", role: "grid", "aria-label": `rail ${id} by groups` });
  const marked = group === null ? null : new Set([`${id}:${group}`]);
  renderMap(map, { ...rails, rails: [r] }, { incidents: alerts.items, marked, stale });
  const mine = alerts.items.filter((a) => a.scope.rails.includes(id) || switches.items.some((s) => touches(a, s.name)));
  const rows = switches.items
    .sort((a, b) => (a.role === b.role ? a.name.localeCompare(b.name, undefined, { numeric: true }) : a.role.localeCompare(b.role)))
    .map((s) => el("tr", {
      class: [shown(s.status, stale), group !== null && String(s.group) === group ? "marked" : ""].join(" "),
      "data-switch": s.name,
    },
      el("td", {}, link(`#/switch/${encodeURIComponent(s.name)}`, s.name)),
      td(s.role), td(s.group ?? "–"), td(stale ? "stale" : s.status || "unknown", "sev"),
      td(`${s.ports_up}/${s.ports_total}`, "num"), td(s.findings, "num"),
      td(s.last_sample_at ? ago(s.last_sample_at) : "no sample", "num")));
  const charts = el("div", { class: "charts" });
  const after = historyCharts(history, charts, `rail-${id}`);
  const loads = history.rails.find((x) => x.rail === id);
  if (loads) {
    after.push(() => timeChart(`rail-${id}-load`, charts, {
      title: "load (Gbit/s, mean per bucket)", times: history.times, series: [{ label: "load", values: loads.load_gbps }],
      range: [Date.parse(history.start) / 1000, Date.parse(history.end) / 1000],
      yfmt: (v) => gbps(v), height: 140,
    }));
  }
  const marker = group === null ? [] : [() => {
    const row = document.querySelector(`#view tr.marked`);
    if (row) row.scrollIntoView({ block: "nearest" });
  }];
  const nodes = [
    el("div", { class: "page" },
      el("section", { class: "panel wide" },
        el("h2", { text: `Rail ${id} ` }, el("small", { id: "status", class: shown(r.status, stale), text: stale ? "stale verdict" : r.status })),
        el("p", { class: "facts", text:
          `capacity ${pct(r.capacity_fraction)} of design (${gbps(r.live_gbps)} of ${gbps(r.design_gbps)}) · ` +
          `weakest ${r.bottleneck || "–"} at ${pct(r.bottleneck_fraction)} · load ${gbps(r.load_gbps)} · ` +
          `PFC paused ${pct(r.pfc_pause_ratio, 2)}` }),
        map),
      section("Over time", charts),
      section(`Incidents on rail ${id}`, mine.length
        ? table(["severity", "incident", "since"], mine.map((a) => el("tr", { class: a.severity },
          td(a.severity, "sev"), el("td", {}, link(`#/incident/${a.id}`, a.summary)), td(ago(a.started_at), "num"))))
        : el("p", { class: "empty", text: "no firing incident on this rail" })),
      section(`Leaves and spines (${switches.items.length})`,
        table(["switch", "role", "group", "status", "ports up", "findings", "last sample"], rows, { id: "rail-switches" }))),
  ];
  return { nodes, after: [...after, ...marker] };
}

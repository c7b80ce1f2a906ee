// One port over a range (?range=1h|6h|24h, or ?from=&to= as ISO times): bit rates, PFC pause rates
// (all priorities, or one), errors and discards, and link state, from /v1/series, with the windows
// of the incidents touching the port shaded on every chart; then its optics (views/optics.js).

import { api, clock, el, enc, link, onPort, q, rate, bps, section, safeDecode, switchWide, table, td } from "../core.js";
import { alignSeries, incidentWindows, timeChart } from "../charts.js";
import { opticsSection } from "./optics.js";

const RANGES = { "15m": 900, "1h": 3600, "6h": 6 * 3600, "24h": 86400 };

function rangeOf(query) {
  const from = query.get("from");
  const to = query.get("to");
  if (from && to && Date.parse(from) < Date.parse(to)) {
    return { from: new Date(from).toISOString(), to: new Date(to).toISOString(), label: "custom" };
  }
  const label = RANGES[query.get("range")] ? query.get("range") : "1h";
  const end = new Date();
  return { from: new Date(end - RANGES[label] * 1000).toISOString(), to: end.toISOString(), label };
}

const CHARTS = [
  { id: "bits", title: "bit rate", metrics: [["in_bps", "in"], ["out_bps", "out"]], fmt: bps },
  { id: "pfc", title: "PFC pause frames/s", metrics: [["pfc_rx_pause_pps", "rx"], ["pfc_tx_pause_pps", "tx"]], fmt: rate, pfc: true },
  { id: "errors", title: "errors and discards /s", fmt: rate, metrics: [
    ["in_errors_ps", "in errors"], ["out_errors_ps", "out errors"], ["in_discards_ps", "in discards"], ["out_discards_ps", "out discards"]] },
  { id: "link", title: "link up (lowest per bucket: 0 = went down)", metrics: [["oper_up", "up"]], fmt: (v) => v.toFixed(0), agg: "min" },
];

export async function port(m, query) {
  const sw = safeDecode(m[1]);
  const name = safeDecode(m[2]);
  const r = rangeOf(query);
  const priority = /^[0-7]$/.test(query.get("priority") || "") ? query.get("priority") : null;
  const urls = CHARTS.map((c) => c.metrics.map(([metric]) =>
    `/v1/series${q({ switch: sw, port: name, metric, from: r.from, to: r.to, agg: c.agg, priority: c.pfc ? priority : null })}`));
  const [bodies, incidents, ports, optics] = await Promise.all([
    Promise.all(urls.map((group) => Promise.all(group.map((u) => api(u))))),
    api("/v1/incidents?state=all&limit=500"),
    api(`/v1/switches/${enc(sw)}/ports?limit=1000`),
    opticsSection(sw, name, r),
  ]);
  const info = ports.items.find((p) => p.name === name);
  const mine = incidents.items.filter((a) => onPort(a, sw, name));
  const wide = incidents.items.filter((a) => switchWide(a, sw) && !onPort(a, sw, name));
  const step = bodies[0][0].step_s;
  const shade = [...incidentWindows(wide, step, true), ...incidentWindows(mine, step)];
  const range = [Date.parse(r.from) / 1000, Date.parse(r.to) / 1000];
  const charts = el("div", { class: "charts wide-charts" });
  const after = [() => {
    CHARTS.forEach((c, i) => {
      const { times, columns } = alignSeries(bodies[i]);
      timeChart(`port-${c.id}`, charts, {
        title: c.pfc && priority !== null ? `${c.title}, priority ${priority}` : c.title,
        times, sources: urls[i], shade, range, yfmt: c.fmt,
        series: c.metrics.map(([, label], j) => ({ label, values: columns[j] })),
      });
    });
  }];
  const base = `#/port/${enc(sw)}/${enc(name)}`;
  const pick = (label) => link(`${base}?range=${label}${priority !== null ? `&priority=${priority}` : ""}`, label,
    { class: `pill${r.label === label ? " on" : ""}` });
  const from = el("input", { type: "datetime-local", id: "from", value: r.from.slice(0, 16), "aria-label": "from (UTC)" });
  const to = el("input", { type: "datetime-local", id: "to", value: r.to.slice(0, 16), "aria-label": "to (UTC)" });
  const custom = el("form", { class: "range", onsubmit: (e) => {
    e.preventDefault();
    location.hash = `${base}?from=${from.value}:00Z&to=${to.value}:00Z`;
  } }, from, to, el("span", { class: "hint", text: "UTC" }), el("button", { type: "submit", text: "show" }));
  const prio = el("select", { id: "priority", "aria-label": "PFC priority", onchange: (e) => {
    const v = e.target.value;
    location.hash = `${base}?${r.label === "custom" ? `from=${r.from}&to=${r.to}` : `range=${r.label}`}${v ? `&priority=${v}` : ""}`;
  } }, el("option", { value: "", text: "PFC: all priorities" }),
  ...[0, 1, 2, 3, 4, 5, 6, 7].map((p) => el("option", { value: String(p), text: `PFC priority ${p}`, selected: String(p) === priority })));
  const facts = info
    ? [`${info.direction || "?"}link`, info.oper_status || "no sample", info.speed_bps ? bps(info.speed_bps) : null,
      info.peer ? `peer ${info.peer.node}${info.peer.port ? `:${info.peer.port}` : ""}` : null, `${info.flaps_24h} flaps in 24 h`]
      .filter(Boolean).join(" · ")
    : "not in the inventory";
  const incRows = [...mine, ...wide].map((a) => el("tr", { class: a.severity, "data-alert-id": String(a.id) },
    td(a.severity, "sev"), el("td", {}, link(`#/incident/${a.id}`, a.summary)), td(mine.includes(a) ? "this port" : "whole switch"),
    td(clock(a.started_at), "num"), td(a.ended_at ? clock(a.ended_at) : "open", "num")));
  const nodes = [
    el("div", { class: "page" },
      el("section", { class: "panel wide" },
        el("h2", { class: "named", text: `${sw} : ${name}` }),
        el("p", { class: "facts", text: facts }),
        el("div", { class: "controls" }, ...Object.keys(RANGES).map(pick), custom, prio),
        el("p", { class: "hint", text: `${clock(r.from)} – ${clock(r.to)} · shaded red: incidents on this port ` +
          `(${mine.length}); amber: on the whole switch (${wide.length})` })),
      el("section", { class: "panel wide" }, charts),
      optics.node,
      section("Incidents on this port and its switch", incRows.length
        ? table(["severity", "incident", "on", "started", "ended"], incRows, { id: "port-incidents" })
        : el("p", { class: "empty", text: "none in the incident history" }))),
  ];
  return { nodes, after: [...after, ...optics.after] };
}

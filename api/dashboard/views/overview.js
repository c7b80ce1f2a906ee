// The overview: the rails x groups map (each cell a link to its rail and group), the firing
// incidents, the fabric's history (down:up ratio worst and per tier, rail capacity, error budgets),
// the worst oversubscription, SLO budgets and job estimates.

import { api, blast, ago, el, gbps, link, pct, SEV_STATUS } from "../core.js";
import { timeChart } from "../charts.js";
import { renderMap } from "../map.js";

function alertsTable(a) {
  const order = { critical: 0, warning: 1, info: 2 };
  const items = [...a.items].sort((x, y) => order[x.severity] - order[y.severity]);
  const rows = items.map((x) =>
    el("tr", { class: SEV_STATUS[x.severity], "data-alert-id": String(x.id), "data-severity": x.severity },
      el("td", { class: "sev", text: x.severity }),
      el("td", {}, link(`#/incident/${x.id}`, x.summary, { title: `${x.rule} · ${x.fingerprint}` })),
      el("td", { class: "blast", text: blast(x.scope) }),
      el("td", { class: "num", text: ago(x.started_at) }),
      el("td", { class: "blast", text: x.acked_at ? `acked${x.acked_by ? ` by ${x.acked_by}` : ""}` : "–" })),
  );
  if (!rows.length) rows.push(el("tr", {}, el("td", { class: "empty", colSpan: 5, text: "no firing incidents" })));
  return el("table", { id: "alerts" },
    el("colgroup", {}, ...[11, 45, 28, 9, 7].map((w) => el("col", { style: `width:${w}%` }))),
    el("thead", {}, el("tr", {}, ...["severity", "incident", "blast radius", "since", "ack"].map((h) => el("th", { text: h })))),
    el("tbody", {}, ...rows));
}

function overTable(o) {
  const rows = o.items.slice(0, 6).map((x) => {
    const status = x.ratio === null || x.drift > 0.05 ? "critical" : x.drift > 0.001 ? "degraded" : "healthy";
    return el("tr", { class: status },
      el("td", {}, link(`#/switch/${encodeURIComponent(x.name)}`, x.name)),
      el("td", { class: "num ratio", text: x.ratio === null ? "∞" : `${x.ratio.toFixed(3)}:1` }),
      el("td", { class: "num", text: x.drift === null ? "" : `+${pct(x.drift)}` }),
      el("td", { class: "num blast", text: `${gbps(x.down_gbps)} ↓ / ${gbps(x.up_gbps)} ↑` }));
  });
  return el("table", { id: "over", class: "compact" }, el("tbody", {}, ...rows));
}

function sloBlocks(s) {
  return s.objectives.map((o) => {
    const status = o.status === "ok" ? "healthy" : o.status === "warning" ? "degraded" : "critical";
    const left = Math.max(0, Math.min(1, o.error_budget_remaining));
    const burns = Object.entries(o.burn_rates).map(([w, v]) => `${w} ×${v}`).join(" ");
    return el("div", { class: `slo ${status}`, title: o.description },
      el("div", { class: "row" },
        el("span", { text: o.name.replaceAll("_", " ") }),
        el("span", { text: `${(o.current * 100).toFixed(4)}% / ${(o.target * 100).toFixed(4)}%` })),
      el("div", { class: "bar" }, el("div", { style: `width:${(left * 100).toFixed(1)}%` })),
      el("div", { class: "row blast" },
        el("span", { text: `budget left ${pct(o.error_budget_remaining)}` }),
        el("span", { text: burns ? `burn ${burns}` : "" })));
  });
}

function estimates(s) {
  const rows = s.estimates.map((e) =>
    el("tr", {}, el("td", { text: `${e.gpus.toLocaleString()} GPUs` }),
      el("td", { class: "num", text: pct(e.interruption_probability, 2) })));
  for (const j of s.jobs.slice(0, 5)) {
    rows.push(el("tr", { class: j.status },
      el("td", {}, link(`#/job/${encodeURIComponent(j.id)}`, `job ${j.id} (${j.gpus} GPUs)`)),
      el("td", { class: "num sev", text: pct(j.interruption_probability, 2) })));
  }
  return el("table", { id: "estimates", class: "compact" }, el("tbody", {}, ...rows));
}

export function historyCharts(h, target, idPrefix) {
  const after = [];
  const ratio = Object.entries(h.ratio).filter(([, v]) => v.some((x) => x !== null));
  const has = (xs) => xs.some((x) => x !== null);
  const source = [`/v1/history?from=${h.start}&to=${h.end}${h.rail ? `&rail=${h.rail}` : ""}`];
  const range = [Date.parse(h.start) / 1000, Date.parse(h.end) / 1000]; // the last bucket has its width
  after.push(() => {
    // a bucket where a ratio was infinite (every uplink down) is a solid band, never a gap bridged over
    const step = h.step_s;
    const infinite = [...new Set(Object.values(h.ratio_infinite).flat())].map((i) => (
      { id: `inf-${i}`, infinite: true, start: h.times[i], end: h.times[i] + step }));
    if (ratio.length || infinite.length) {
      timeChart(`${idPrefix}-ratio`, target, {
        title: `down:up ratio (highest per bucket${infinite.length ? "; solid: ∞, every uplink down" : ""})`,
        times: h.times, sources: source, shade: infinite, bridge: infinite.length ? 0 : undefined, range,
        series: Object.entries(h.ratio).filter(([k, v]) => v.some((x) => x !== null) || h.ratio_infinite[k])
          .map(([k, v]) => ({ label: k === "all" ? "worst tier" : k, values: v })),
        yfmt: (v) => `${v.toFixed(2)}:1`, height: 140,
      });
    }
    const rails = h.rails.filter((r) => has(r.bottleneck_fraction));
    if (rails.length) {
      timeChart(`${idPrefix}-capacity`, target, {
        title: "rail capacity (weakest switch, live/design)", times: h.times, sources: source, range,
        series: rails.map((r) => ({ label: `rail ${r.rail}`, values: r.bottleneck_fraction })),
        yfmt: (v) => pct(v, 0), height: 140,
      });
    }
    const budgets = Object.entries(h.error_budget_remaining).filter(([, v]) => has(v));
    if (budgets.length) {
      timeChart(`${idPrefix}-budget`, target, {
        title: "error budget left", times: h.times, sources: source, range,
        series: budgets.map(([k, v]) => ({ label: k.replaceAll("_", " "), values: v })),
        yfmt: (v) => pct(v, 0), height: 140,
      });
    }
    if (!ratio.length && !rails.length) target.append(el("p", { class: "empty", text: "no history in this range yet" }));
  });
  return after;
}

// Each panel from its own request: one that fails says so in its place, the others still show.
const failed = (what, err) => el("p", { class: "empty error", text: `${what}: could not load (${err.message})` });

export async function overview() {
  const paths = ["/v1/health", "/v1/rails", "/v1/oversubscription?limit=6", "/v1/alerts?state=firing&limit=200",
    "/v1/slo", "/v1/history"];
  const settled = await Promise.allSettled(paths.map((p) => api(p)));
  const errors = settled.filter((r) => r.status === "rejected").map((r) => r.reason);
  // a token to ask for, or no verdict yet: the header says so (the panels would only repeat it)
  const blocking = errors.find((e) => e.status === 401 || (e.status === 503 && /no-evaluation/.test(e.problem.type || "")));
  if (blocking || errors.length === settled.length) throw blocking || errors[0];
  const [health, rails, over, alerts, slo, history] = settled.map((r) => (r.status === "fulfilled" ? r.value : null));
  const err = (i) => settled[i].reason;
  const stale = health ? health.stale : true; // no health: the verdict cannot be vouched for
  const map = el("div", { id: "heatmap", role: "grid", "aria-label": "rails by groups health" });
  if (rails) renderMap(map, rails, { incidents: alerts ? alerts.items : [], stale });
  else map.append(failed("the map", err(1)));
  const a = rails && rails.asymmetry;
  const asym = a
    ? `rail asymmetry: ${pct(a.spread)} (worst rail ${a.worst_rail} at ${pct(a.worst_fraction)})` +
      (a.load_spread === null ? "" : ` · load spread ${pct(a.load_spread)}`)
    : "";
  const charts = el("div", { id: "history", class: "charts" });
  const after = history ? historyCharts(history, charts, "overview") : [() => charts.append(failed("history", err(5)))];
  const total = !alerts ? "" : alerts.total > alerts.items.length ? `${alerts.items.length} of ${alerts.total}` : `${alerts.total}`;
  const nodes = [
    el("div", { class: "overview" },
      el("section", { id: "map-panel", class: "panel map-panel" },
        el("h2", { text: "Rails × groups " }, el("small", { id: "map-note", text: rails ? `${rails.rails.length} rails × ${rails.groups.length} groups` : "" })),
        map,
        el("div", { class: "legend" },
          ...["healthy", "degraded", "critical"].flatMap((s) => [el("span", { class: `swatch ${s}` }), s]),
          el("span", { class: "hint", text: stale ? "stale verdict: cells grey" : "a cell opens its rail" }),
          el("span", { id: "asym", class: "asym", text: asym }))),
      el("section", { class: "panel side" },
        el("h2", { text: "History " }, el("small", { text: "up to 6 h" })),
        charts,
        el("h2", { text: "Worst oversubscription " }, el("small", { id: "over-note", text: over ? `design ${over.design_ratio}:1 · ${over.total} switches` : "" })),
        over ? overTable(over) : failed("oversubscription", err(2)),
        el("h2", { text: "SLO budgets" }),
        el("div", { id: "slo" }, ...(slo ? sloBlocks(slo) : [failed("SLOs", err(4))])),
        el("h2", { text: "Job interruption (30 days)" }),
        slo ? estimates(slo) : failed("estimates", err(4))),
      el("section", { class: "panel alerts-panel" },
        el("h2", { text: "Firing incidents " }, el("small", { id: "alerts-note", text: total })),
        el("div", { class: "scroll" }, alerts ? alertsTable(alerts) : failed("incidents", err(3))))),
  ];
  return { nodes, after };
}

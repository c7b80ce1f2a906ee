// fabricmon dashboard: reads the REST API like any client and redraws every few seconds.
// No build step and no dependencies. Everything from the API is inserted as text, never HTML.
"use strict";

const params = new URLSearchParams(location.search);
const REFRESH_MS = Math.max(1000, Number(params.get("refresh") || 5) * 1000);
const TOKEN_KEY = "fabricmon-token";
const $ = (sel) => document.querySelector(sel);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const child of children) node.append(child);
  return node;
}

class ApiError extends Error {
  constructor(status, problem) {
    super((problem && problem.detail) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
  }
}

async function api(path) {
  const headers = { Accept: "application/json" };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  const resp = await fetch(path, { headers, cache: "no-store" });
  const body = await resp.json().catch(() => null);
  if (!resp.ok) throw new ApiError(resp.status, body);
  return body;
}

function askToken() {
  const dialog = $("#token-dialog");
  if (!dialog.open) dialog.showModal();
}

$("#token-form").addEventListener("submit", () => {
  sessionStorage.setItem(TOKEN_KEY, $("#token").value.trim());
  refresh();
});

const pct = (x, digits = 1) => (x === null || x === undefined ? "–" : `${(x * 100).toFixed(digits)}%`);
const gbps = (x) => (x === null || x === undefined ? "–" : x >= 1000 ? `${(x / 1000).toFixed(1)}T` : `${x.toFixed(0)}G`);

function ago(iso) {
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 90) return `${Math.round(s)} s ago`;
  if (s < 5400) return `${Math.round(s / 60)} min ago`;
  if (s < 172800) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

function renderHealth(h) {
  const overall = $("#overall");
  overall.className = `badge ${h.status}`;
  overall.dataset.status = h.status;
  overall.textContent = h.status;
  const chips = Object.entries(h.checks).map(([name, c]) =>
    el("span", {
      class: `chip ${c.status}`,
      text: `${name.replace("_", " ")}${c.findings_total ? ` · ${c.findings_total}` : ""}`,
      title: c.findings.slice(0, 8).map((f) => `[${f.severity}] ${f.summary}`).join("\n") || c.status,
    }),
  );
  $("#checks").replaceChildren(...chips);
  $("#updated").textContent = `evaluated ${ago(h.updated_at)}`;
  $("#stale").hidden = !h.stale;
}

function renderRails(r) {
  const groups = r.groups;
  const map = $("#heatmap");
  map.style.gridTemplateColumns = `auto repeat(${groups.length}, minmax(6px, 1fr)) auto`;
  map.style.gridTemplateRows = `auto repeat(${r.rails.length}, minmax(12px, 1fr))`;
  const every = Math.ceil(groups.length / 16);
  const nodes = [el("span", { class: "label" })];
  groups.forEach((g, i) => nodes.push(el("span", { class: "label col", text: i % every === 0 ? `g${g}` : "" })));
  nodes.push(el("span", { class: "label rowinfo", text: "capacity · load · PFC" }));
  for (const rail of r.rails) {
    nodes.push(el("span", { class: "label", text: `rail ${rail.rail}` }));
    for (const cell of rail.groups) {
      const tip = [`rail ${rail.rail} · group ${cell.group}: ${cell.status}`, ...cell.summaries].join("\n");
      nodes.push(
        el("div", {
          class: `cell ${cell.status}${cell.findings ? " has" : ""}`,
          title: tip,
          "data-rail": String(rail.rail),
          "data-group": String(cell.group),
          "data-status": cell.status,
        }),
      );
    }
    const info = `${pct(rail.bottleneck_fraction)} · ${gbps(rail.load_gbps)} · ${pct(rail.pfc_pause_ratio, 2)}`;
    nodes.push(el("span", { class: `label rowinfo ${rail.status}`, text: info, title: rail.bottleneck || "" }));
  }
  map.replaceChildren(...nodes);
  $("#map-note").textContent = `${r.rails.length} rails × ${groups.length} groups`;
  const a = r.asymmetry;
  $("#asym").textContent = a
    ? `rail asymmetry: ${pct(a.spread)} (worst rail ${a.worst_rail} at ${pct(a.worst_fraction)})` +
      (a.load_spread === null ? "" : ` · load spread ${pct(a.load_spread)}`)
    : "";
}

function renderOver(o) {
  const rows = o.items.slice(0, 6).map((x) => {
    const status = x.ratio === null || x.drift > 0.05 ? "critical" : x.drift > 0.001 ? "degraded" : "healthy";
    return el(
      "tr",
      { class: status },
      el("td", { text: x.name }),
      el("td", { class: "num ratio", text: x.ratio === null ? "∞" : `${x.ratio.toFixed(3)}:1` }),
      el("td", { class: "num", text: x.drift === null ? "" : `+${pct(x.drift)}` }),
      el("td", { class: "num blast", text: `${gbps(x.down_gbps)} ↓ / ${gbps(x.up_gbps)} ↑` }),
    );
  });
  $("#over tbody").replaceChildren(...rows);
  $("#over-note").textContent = `design ${o.design_ratio}:1 · ${o.total} switches`;
}

const plural = (n, word) => `${n.toLocaleString()} ${word}${n === 1 ? "" : "s"}`;
// A short list by name, a long one by count.
const few = (items, word, max = 3) =>
  items.length <= max ? `${word}${items.length > 1 ? "s" : ""} ${items.join(",")}` : plural(items.length, word);

function blast(scope) {
  const parts = [plural(scope.gpus, "GPU"), plural(scope.servers.length, "server")];
  if (scope.rails.length) parts.push(few(scope.rails, "rail"));
  if (scope.groups.length) parts.push(few(scope.groups, "group"));
  if (scope.switches.length) {
    const shown = scope.switches.slice(0, 2).join(", ");
    parts.push(scope.switches.length > 2 ? `${shown} +${scope.switches.length - 2}` : shown);
  }
  return parts.join(" · ");
}

function renderAlerts(a) {
  const order = { critical: 0, warning: 1, info: 2 };
  const items = [...a.items].sort((x, y) => order[x.severity] - order[y.severity]);
  const rows = items.map((x) =>
    el(
      "tr",
      { class: x.severity === "warning" ? "degraded" : x.severity === "info" ? "unknown" : "critical",
        "data-alert-id": String(x.id), "data-severity": x.severity },
      el("td", { class: "sev", text: x.severity }),
      el("td", { text: x.summary, title: `${x.rule} · ${x.fingerprint}` }),
      el("td", { class: "blast", text: blast(x.scope) }),
      el("td", { class: "num", text: ago(x.started_at) }),
      el("td", { class: "blast", text: x.acked_at ? `acked${x.acked_by ? ` by ${x.acked_by}` : ""}` : "–" }),
    ),
  );
  if (!rows.length) rows.push(el("tr", {}, el("td", { class: "empty", colSpan: 5, text: "no firing alerts" })));
  $("#alerts tbody").replaceChildren(...rows);
  $("#alerts-note").textContent = a.total > a.items.length ? `${a.items.length} of ${a.total}` : `${a.total}`;
}

function renderSlo(s) {
  const blocks = s.objectives.map((o) => {
    const status = o.status === "ok" ? "healthy" : o.status === "warning" ? "degraded" : "critical";
    const left = Math.max(0, Math.min(1, o.error_budget_remaining));
    const burns = Object.entries(o.burn_rates).map(([w, v]) => `${w} ×${v}`).join(" ");
    return el(
      "div",
      { class: `slo ${status}`, title: o.description },
      el("div", { class: "row" },
        el("span", { text: o.name.replaceAll("_", " ") }),
        el("span", { text: `${(o.current * 100).toFixed(4)}% / ${(o.target * 100).toFixed(4)}%` })),
      el("div", { class: "bar" }, el("div", { style: `width:${(left * 100).toFixed(1)}%` })),
      el("div", { class: "row blast" },
        el("span", { text: `budget left ${pct(o.error_budget_remaining)}` }),
        el("span", { text: burns ? `burn ${burns}` : "" })),
    );
  });
  $("#slo").replaceChildren(...blocks);
  const rows = s.estimates.map((e) =>
    el("tr", {}, el("td", { text: `${e.gpus.toLocaleString()} GPUs` }),
      el("td", { class: "num", text: pct(e.interruption_probability, 2) })),
  );
  for (const j of s.jobs.slice(0, 5)) {
    rows.push(el("tr", { class: j.status }, el("td", { text: `job ${j.id} (${j.gpus} GPUs)` }),
      el("td", { class: "num sev", text: pct(j.interruption_probability, 2) })));
  }
  $("#estimates tbody").replaceChildren(...rows);
}

function waiting(message) {
  const overall = $("#overall");
  overall.className = "badge unknown";
  overall.dataset.status = "unknown";
  overall.textContent = "unknown";
  $("#updated").textContent = message;
}

const VIEWS = [
  ["/v1/health", renderHealth],
  ["/v1/rails", renderRails],
  ["/v1/oversubscription?limit=6", renderOver],
  ["/v1/alerts?state=firing&limit=200", renderAlerts],
  ["/v1/slo", renderSlo],
];

let timer = null;
async function refresh() {
  clearTimeout(timer);
  const results = await Promise.allSettled(VIEWS.map(([path]) => api(path)));
  let problem = null;
  results.forEach((res, i) => {
    if (res.status === "fulfilled") {
      VIEWS[i][1](res.value);
    } else {
      problem = problem || res.reason;
    }
  });
  const conn = $("#conn");
  if (problem === null) {
    conn.textContent = `live · every ${REFRESH_MS / 1000} s`;
    conn.className = "conn";
  } else if (problem.status === 401) {
    conn.textContent = "token needed";
    askToken();
  } else if (problem.status === 503 && problem.problem.type && problem.problem.type.endsWith("no-evaluation")) {
    waiting("waiting for the analyzer's first evaluation");
  } else {
    conn.textContent = `API: ${problem.message}`;
    conn.className = "conn error";
  }
  document.body.dataset.loaded = "true";
  timer = setTimeout(refresh, REFRESH_MS);
}

refresh();

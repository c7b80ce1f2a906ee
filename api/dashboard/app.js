// fabricmon dashboard: a hash router over views that read the REST API like any client.
// Every view is a URL (#/, #/rail/3, #/switch/NAME, #/port/NAME/PORT?range=6h, #/incident/12,
// #/job/ID, #/links) a person can share. The header's verdict refreshes every few seconds; the overview
// redraws with it, the other views when they are opened again.

import { $, ago, api, el, safeDecode, TOKEN_KEY } from "./core.js";
import { destroyCharts, registry } from "./charts.js";
import { overview } from "./views/overview.js";
import { rail } from "./views/rail.js";
import { switchView } from "./views/switch.js";
import { port } from "./views/port.js";
import { incident } from "./views/incident.js";
import { job } from "./views/job.js";
import { links } from "./views/links.js";

const params = new URLSearchParams(location.search);
const REFRESH_MS = Math.max(1000, Number(params.get("refresh") || 5) * 1000);

const ROUTES = [
  [/^\/?$/, overview, () => []],
  [/^\/rail\/(\d+)$/, rail, (m) => [["rail " + m[1]]]],
  [/^\/switch\/([^/]+)$/, switchView, (m) => [[safeDecode(m[1])]]],
  [/^\/port\/([^/]+)\/(.+)$/, port, (m) => [[safeDecode(m[1]), `#/switch/${m[1]}`], [safeDecode(m[2])]]],
  [/^\/incident\/(\d+)$/, incident, (m) => [["incident " + m[1]]]],
  [/^\/job\/(.+)$/, job, (m) => [["job " + safeDecode(m[1])]]],
  [/^\/links$/, links, () => [["links by time to failure"]]],
];

function parseHash() {
  const raw = location.hash.replace(/^#/, "") || "/";
  const [path, query = ""] = raw.split("?");
  return { path, query: new URLSearchParams(query) };
}

function renderHealth(h) {
  const overall = $("#overall");
  const status = h.stale ? "unknown" : h.status;
  overall.className = `badge ${status}`;
  overall.dataset.status = status;
  overall.textContent = h.stale ? `stale: ${h.status}?` : h.status;
  const chips = Object.entries(h.checks).map(([name, c]) =>
    el("span", {
      class: `chip ${h.stale ? "unknown" : c.status}`,
      text: `${name.replace("_", " ")}${c.findings_total ? ` · ${c.findings_total}` : ""}`,
      title: c.findings.slice(0, 8).map((f) => `[${f.severity}] ${f.summary}`).join("\n") || c.status,
    }),
  );
  $("#checks").replaceChildren(...chips);
  $("#updated").textContent = `evaluated ${ago(h.updated_at)}`;
  $("#stale").hidden = !h.stale;
}

function waiting(message) {
  const overall = $("#overall");
  overall.className = "badge unknown";
  overall.dataset.status = "unknown";
  overall.textContent = "unknown";
  $("#updated").textContent = message;
}

function askToken() {
  const dialog = $("#token-dialog");
  if (!dialog.open) dialog.showModal();
}

$("#token-form").addEventListener("submit", () => {
  sessionStorage.setItem(TOKEN_KEY, $("#token").value.trim());
  show();
});

// A failed request, said where it happened: a missing verdict is "unknown", never green.
export function problem(err) {
  const conn = $("#conn");
  if (err.status === 401) {
    conn.textContent = "token needed";
    askToken();
  } else if (err.status === 503 && err.problem.type && err.problem.type.endsWith("no-evaluation")) {
    waiting("waiting for the analyzer's first evaluation");
  } else {
    conn.textContent = `API: ${err.message}`;
    conn.className = "conn error";
  }
}

async function refreshHealth() {
  try {
    renderHealth(await api("/v1/health"));
    const conn = $("#conn");
    conn.textContent = `live · every ${REFRESH_MS / 1000} s`;
    conn.className = "conn";
  } catch (err) {
    problem(err);
  }
}

let timer = null;
let paused = false;
let current = null;
let generation = 0;

async function show() {
  clearTimeout(timer);
  const { path, query } = parseHash();
  const route = ROUTES.find(([re]) => re.test(path));
  const main = $("#view");
  const gen = ++generation;
  const started = performance.now();
  const [, view, crumbs] = route || [null, null, () => []];
  const m = route ? path.match(route[0]) : null;
  main.dataset.view = view ? view.name : "none"; // the header's own refresh goes by it, failed or not
  const trail = [el("a", { href: "#/", text: "overview" })];
  for (const [text, href] of m ? crumbs(m) : []) {
    trail.push(el("span", { class: "sep", text: "›" }), href ? el("a", { href, text }) : el("span", { text }));
  }
  $("#crumbs").replaceChildren(...trail);
  const fresh = current !== location.hash;
  current = location.hash;
  if (fresh) {
    for (const key of Object.keys(registry.charts)) delete registry.charts[key];
  }
  const health = refreshHealth();
  try {
    if (!view) {
      main.replaceChildren(el("p", { class: "empty", text: `no such view: ${path}` }));
    } else {
      const content = await view(m, query, { fresh });
      if (gen !== generation) return; // another view was asked for meanwhile
      destroyCharts();
      main.replaceChildren(...content.nodes);
      for (const after of content.after || []) after();
    }
  } catch (err) {
    if (gen !== generation) return;
    problem(err);
    if (fresh || !main.childElementCount) { // a refresh that failed keeps the last good content
      destroyCharts();
      main.replaceChildren(el("p", { class: "empty error", text: `could not load this view: ${err.message}` }));
    }
  }
  await health;
  if (gen !== generation) return;
  const ms = performance.now() - started;
  registry.renders.push({ view: view ? view.name : "none", hash: location.hash, ms });
  if (registry.renders.length > 200) registry.renders.splice(0, registry.renders.length - 200);
  registry.count = (registry.count || 0) + 1;
  document.body.dataset.loaded = "true";
  document.body.dataset.renders = String(registry.count);
  if (fresh) main.focus({ preventScroll: true });
  if ((!view || view === overview) && !paused) timer = setTimeout(show, REFRESH_MS);
}

setInterval(() => {
  if ($("#view").dataset.view !== overview.name) refreshHealth(); // the overview refreshes it itself
}, REFRESH_MS);
window.addEventListener("hashchange", show);
registry.refresh = show;
registry.pause = () => { // stop the overview's own refresh (tests, screenshots)
  paused = true;
  clearTimeout(timer);
};
registry.resume = () => {
  paused = false;
  show();
};
show();

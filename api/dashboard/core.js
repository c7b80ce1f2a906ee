// What every view shares: the API client (with the bearer token a person types in), DOM building
// (everything from the API is inserted as text, never as HTML), formatting and statuses.

export const TOKEN_KEY = "fabricmon-token";
export const $ = (sel, root = document) => root.querySelector(sel);

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("data-") || k.startsWith("aria-") || k === "role" || k === "href") node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

export class ApiError extends Error {
  constructor(status, problem, path) {
    super((problem && problem.detail) || `HTTP ${status} from ${path}`);
    this.status = status;
    this.problem = problem || {};
    this.path = path;
  }
}

export async function api(path) {
  const headers = { Accept: "application/json" };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  const resp = await fetch(path, { headers, cache: "no-store" });
  const body = await resp.json().catch(() => null);
  if (!resp.ok) throw new ApiError(resp.status, body, path);
  return body;
}

export const q = (params) => {
  const s = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") s.set(k, String(v));
  const text = s.toString();
  return text ? `?${text}` : "";
};

export const enc = encodeURIComponent;
export const pct = (x, digits = 1) => (x === null || x === undefined ? "–" : `${(x * 100).toFixed(digits)}%`);
export const gbps = (x) =>
  x === null || x === undefined ? "–" : x >= 1000 ? `${(x / 1000).toFixed(1)}T` : `${x.toFixed(0)}G`;

export function bps(x) {
  if (x === null || x === undefined) return "–";
  const units = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  for (const [div, u] of units) if (Math.abs(x) >= div) return `${(x / div).toFixed(1)}${u}`;
  return x.toFixed(0);
}

export function rate(x) {
  if (x === null || x === undefined) return "–";
  if (x === 0) return "0";
  if (Math.abs(x) >= 1000) return bps(x);
  return x < 1 ? x.toFixed(3) : x.toFixed(1);
}

export function ago(iso) {
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 90) return `${Math.round(s)} s ago`;
  if (s < 5400) return `${Math.round(s / 60)} min ago`;
  if (s < 172800) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

export const clock = (iso) => (iso ? new Date(iso).toISOString().replace("T", " ").slice(0, 19) + " UTC" : "–");
export const plural = (n, word) => `${n.toLocaleString()} ${word}${n === 1 ? "" : "s"}`;

// A severity as the colour class the map and tables use.
export const SEV_STATUS = { critical: "critical", warning: "degraded", info: "unknown" };
export const RANK = { unknown: 0, healthy: 1, degraded: 2, critical: 3 };
export const worse = (a, b) => ((RANK[b] || 0) > (RANK[a] || 0) ? b : a);

export function blast(scope) {
  const few = (items, word, max = 3) =>
    items.length <= max ? `${word}${items.length > 1 ? "s" : ""} ${items.join(",")}` : plural(items.length, word);
  const parts = [plural(scope.gpus, "GPU"), plural(scope.servers.length, "server")];
  if (scope.rails.length) parts.push(few(scope.rails, "rail"));
  if (scope.groups.length) parts.push(few(scope.groups, "group"));
  if (scope.switches.length) {
    const shown = scope.switches.slice(0, 2).join(", ");
    parts.push(scope.switches.length > 2 ? `${shown} +${scope.switches.length - 2}` : shown);
  }
  return parts.join(" · ");
}

// The (rail, group) cells of the map a blast radius covers: a rail without groups is the rail in
// every group (a spine serves them all), groups without rails are every rail of those groups.
export function cellsOf(scope, rails, groups) {
  const rs = scope.rails.length ? scope.rails : scope.groups.length ? rails : [];
  const gs = scope.groups.length ? scope.groups : scope.rails.length ? groups : [];
  const out = [];
  for (const r of rs) for (const g of gs) out.push(`${r}:${g}`);
  return out;
}

// Whether an incident touches a switch (its scope or its root cause).
export function touches(incident, sw) {
  const s = incident.scope;
  const root = incident.root_cause || {};
  return s.switches.includes(sw) || root.switch === sw || s.ports.some((p) => p.startsWith(`${sw}:`));
}

// Whether an incident is about this port: in its blast radius, or its root cause.
export function onPort(incident, sw, port) {
  const root = incident.root_cause || {};
  return incident.scope.ports.includes(`${sw}:${port}`) || (root.switch === sw && root.port === port);
}

// Whether an incident is about the whole switch (its root cause is the switch, no port): it
// concerns every port of it, shown apart from the port's own.
export function switchWide(incident, sw) {
  const root = incident.root_cause || {};
  return root.switch === sw && !root.port;
}

export function safeDecode(text) {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

// A verdict's status as shown: grey while the verdict is stale.
export const shown = (status, stale) => (stale ? "unknown" : status || "unknown");

export const link = (href, text, attrs = {}) => el("a", { href, text, ...attrs });
export const table = (head, rows, attrs = {}) =>
  el("table", attrs, el("thead", {}, el("tr", {}, ...head.map((h) => el("th", { text: h })))), el("tbody", {}, ...rows));
export const td = (text, cls) => el("td", { text: text === undefined || text === null ? "–" : String(text), class: cls });
export const section = (title, ...children) =>
  el("section", { class: "panel" }, el("h2", { text: title }), ...children);

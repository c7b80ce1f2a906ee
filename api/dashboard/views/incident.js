// One incident: its root cause and where it is, the symptoms it explains, its blast radius drawn
// on the map, the recommended action and what a scheduler did about it, and one timeline of its
// transitions and webhook deliveries.

import { api, blast, cellsOf, clock, el, enc, link, section, SEV_STATUS, shown, table, td } from "../core.js";
import { renderMap } from "../map.js";

// The port's charts around the incident: from before it opened to a little after it ended (or now).
function around(a) {
  const start = Date.parse(a.started_at);
  const end = a.ended_at ? Date.parse(a.ended_at) : Date.now();
  const pad = Math.max(5 * 60e3, (end - start) / 2);
  const iso = (ms) => new Date(ms).toISOString();
  return `?from=${iso(start - pad)}&to=${iso(Math.min(Date.now(), end + pad))}`;
}

function where(root, a) {
  if (root.switch && root.port) {
    return link(`#/port/${enc(root.switch)}/${enc(root.port)}${around(a)}`, `${root.switch}:${root.port}`);
  }
  if (root.switch) return link(`#/switch/${enc(root.switch)}`, root.switch);
  if (root.rail !== null && root.rail !== undefined) return link(`#/rail/${root.rail}`, `rail ${root.rail}`);
  return root.server || root.key || "–";
}

export async function incident(m) {
  const id = Number(m[1]);
  const [a, rails, actions, health] = await Promise.all([
    api(`/v1/incidents/${id}`), api("/v1/rails"), api(`/v1/actions?incident=${id}&limit=100`), api("/v1/health"),
  ]);
  const railIds = rails.rails.map((r) => r.rail);
  const cells = new Set();
  for (const s of [a, ...a.symptoms]) for (const key of cellsOf(s.scope, railIds, rails.groups)) cells.add(key);
  const map = el("div", { id: "incident-map", role: "grid", "aria-label": "blast radius on the rails by groups map" });
  renderMap(map, rails, { incidents: a.state === "firing" ? [a] : [], marked: cells, stale: health.stale });
  const symptoms = a.symptoms.map((s) => el("tr", { class: s.severity, "data-rule": s.rule },
    td(s.severity, "sev"), td(s.rule), td(s.summary), td(blast(s.scope), "blast")));
  const events = [
    ...a.timeline.map((e) => ({ time: e.time, what: e.event, detail: `${e.severity} · ${e.action} · ${e.summary}`, kind: "transition" })),
    ...a.deliveries.map((d) => ({ time: d.time, what: d.event, kind: "webhook",
      detail: `${d.status} after ${d.attempts} attempt(s)${d.delivered_at ? ` at ${clock(d.delivered_at)}` : ""}` +
        `${d.last_error ? ` · ${d.last_error}` : ""} · receiver ${d.webhook.slice(0, 12)}` })),
    ...actions.items.map((x) => ({ time: x.time, what: `${x.scheduler} ${x.action}`, kind: "scheduler",
      detail: `${x.status}${x.nodes.length ? ` · ${x.nodes.join(", ")}` : ""}${x.commands.length ? ` · ${x.commands.join("; ")}` : ""}` })),
  ].sort((x, y) => Date.parse(x.time) - Date.parse(y.time));
  const timeline = events.map((e) => el("tr", { "data-kind": e.kind }, td(clock(e.time), "num"), td(e.kind), td(e.what), td(e.detail)));
  const acted = actions.items.length
    ? actions.items.map((x) => `${x.scheduler} ${x.action}: ${x.status}`).join(" · ")
    : "no scheduler action stored";
  const nodes = [
    el("div", { class: "page" },
      el("section", { class: "panel wide", id: "incident-head", "data-state": a.state, "data-severity": a.severity },
        el("h2", { text: `Incident ${a.id} ` }, el("small", { id: "status", class: shown(SEV_STATUS[a.severity], health.stale),
          text: `${a.severity} · ${a.state}${health.stale ? " · stale verdict: it may have changed" : ""}` })),
        el("p", { class: "summary", text: a.summary }),
        el("dl", { class: "facts" },
          el("dt", { text: "root cause" }), el("dd", {}, `${a.root_cause.rule || a.rule} at `, where(a.root_cause, a)),
          el("dt", { text: "blast radius" }), el("dd", { text: blast(a.scope) }),
          el("dt", { text: "recommended" }), el("dd", { id: "action", text:
            `${a.recommended_action}${a.action_hosts.length ? ` ${a.action_hosts.join(", ")}` : ""}` +
            `${a.needs_review ? " · needs review (circuit breaker)" : ""}${a.reason ? ` · ${a.reason}` : ""}` }),
          el("dt", { text: "scheduler" }), el("dd", { id: "acted", text: acted }),
          el("dt", { text: "open" }), el("dd", { text: `${clock(a.started_at)} – ${a.ended_at ? clock(a.ended_at) : "now"}` }),
          el("dt", { text: "acknowledged" }), el("dd", { text: a.acked_at ? `${clock(a.acked_at)}${a.acked_by ? ` by ${a.acked_by}` : ""}` : "no" }))),
      section("Blast radius", map),
      section(`Symptoms (${a.symptoms.length})`, a.symptoms.length
        ? table(["severity", "rule", "finding", "blast radius"], symptoms, { id: "symptoms" })
        : el("p", { class: "empty", text: "the root cause alone" })),
      section("Timeline", table(["time", "kind", "what", "detail"], timeline, { id: "timeline" }))),
  ];
  return { nodes };
}

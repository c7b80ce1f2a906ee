// One job: its hosts on the map (their groups, every rail), its health under the open incidents,
// efficiency loss and interruption probability, and the incidents that touched its hosts.

import { api, clock, el, enc, link, pct, safeDecode, section, shown, table, td } from "../core.js";
import { renderMap } from "../map.js";

export async function job(m) {
  const id = safeDecode(m[1]);
  const [j, health, rails, incidents] = await Promise.all([
    api(`/v1/jobs/${enc(id)}`), api(`/v1/jobs/${enc(id)}/health`), api("/v1/rails"),
    api("/v1/incidents?state=all&limit=500"),
  ]);
  const hosts = new Set(j.hosts);
  const cells = new Set();
  for (const r of rails.rails) for (const g of health.groups) cells.add(`${r.rail}:${g}`);
  const map = el("div", { id: "job-map", role: "grid", "aria-label": "the job's hosts on the rails by groups map" });
  const firing = incidents.items.filter((a) => a.state === "firing");
  renderMap(map, rails, { incidents: firing, marked: cells, stale: health.stale });
  const faults = health.faults.map((f) => el("tr", { class: f.severity, "data-alert-id": f.id === null ? "" : String(f.id) },
    td(f.severity, "sev"), el("td", {}, f.id === null ? f.summary : link(`#/incident/${f.id}`, f.summary)),
    td(f.recommended_action), td(f.affected_hosts.join(", ")), td(f.action_hosts.join(", ") || "–")));
  const past = incidents.items.filter((a) => a.scope.servers.some((s) => hosts.has(s)));
  const history = past.map((a) => el("tr", { class: a.severity, "data-alert-id": String(a.id) },
    td(a.state), td(a.severity, "sev"), el("td", {}, link(`#/incident/${a.id}`, a.summary)),
    td(clock(a.started_at), "num"), td(a.ended_at ? clock(a.ended_at) : "open", "num")));
  const railRows = health.rails.map((r) => el("tr", { class: r.status },
    el("td", {}, link(`#/rail/${r.rail}`, `rail ${r.rail}`)), td(r.status, "sev"), td(r.leaves.length, "num"),
    td(r.spines, "num"), td(r.faults, "num")));
  const listed = j.hosts.length > 24 ? `${j.hosts.slice(0, 24).join(", ")} … +${j.hosts.length - 24}` : j.hosts.join(", ");
  const nodes = [
    el("div", { class: "page" },
      el("section", { class: "panel wide", id: "job-head", "data-status": shown(health.status, health.stale) },
        el("h2", { class: "named", text: `Job ${id} ` }, el("small", { id: "status", class: shown(health.status, health.stale),
          text: health.stale ? "stale verdict" : health.status })),
        el("dl", { class: "facts" },
          el("dt", { text: "hosts" }), el("dd", { id: "job-hosts", text: `${j.hosts.length} (${j.gpus} GPUs): ${listed}` }),
          el("dt", { text: "groups" }), el("dd", { text: health.groups.join(", ") || "–" }),
          el("dt", { text: "efficiency loss" }), el("dd", { text: pct(health.efficiency_loss, 2) }),
          el("dt", { text: "interruption" }), el("dd", { text:
            `${pct(health.interruption_probability, 2)} over its remaining ${health.remaining_days.toFixed(1)} days` }),
          el("dt", { text: "started" }), el("dd", { text: j.started_at ? clock(j.started_at) : "–" }),
          health.unknown_hosts.length ? el("dt", { text: "unknown hosts" }) : null,
          health.unknown_hosts.length ? el("dd", { text: health.unknown_hosts.join(", ") }) : null)),
      section("Its hosts on the fabric", map),
      section(`Open faults under it (${health.faults.length})`, health.faults.length
        ? table(["severity", "incident", "action", "affected hosts", "action on"], faults, { id: "job-faults" })
        : el("p", { class: "empty", text: "none" })),
      section("Its rails", table(["rail", "status", "leaves", "spines", "faults"], railRows)),
      section(`Incidents that touched its hosts (${past.length})`, past.length
        ? table(["state", "severity", "incident", "started", "ended"], history, { id: "job-history" })
        : el("p", { class: "empty", text: "none in the incident history" }))),
  ];
  return { nodes };
}

// The rails x groups map: each cell is one rail's slice of one aggregation group, coloured by the
// worse of the verdict's findings there and the open incidents whose blast radius covers it, and a
// link to that rail with the group marked. Readable from 1 to 64 groups: labels thin out, cells
// shrink to a few pixels.

import { SEV_STATUS, cellsOf, el, gbps, pct, worse } from "./core.js";

export function incidentCells(incidents, rails, groups) {
  const out = new Map();
  for (const a of incidents) {
    const status = SEV_STATUS[a.severity] || "unknown";
    if (status === "unknown") continue;
    for (const key of cellsOf(a.scope, rails, groups)) {
      const cur = out.get(key) || { status: "healthy", ids: [] };
      cur.status = worse(cur.status, status);
      cur.ids.push(a.id);
      out.set(key, cur);
    }
  }
  return out;
}

// marked: a Set of "rail:group" keys drawn outlined (an incident's or a job's cells).
export function renderMap(target, railsBody, { incidents = [], marked = null, stale = false } = {}) {
  const groups = railsBody.groups;
  const railIds = railsBody.rails.map((r) => r.rail);
  const open = incidentCells(incidents, railIds, groups);
  target.classList.add("heatmap");
  target.classList.toggle("focus", marked !== null);
  target.style.gridTemplateColumns = `auto repeat(${groups.length}, minmax(4px, 1fr)) auto`;
  target.style.gridTemplateRows = `auto repeat(${railsBody.rails.length}, minmax(12px, 1fr))`;
  const every = Math.ceil(groups.length / 16);
  const nodes = [el("span", { class: "label" })];
  groups.forEach((g, i) => nodes.push(el("span", { class: "label col", text: i % every === 0 ? `g${g}` : "" })));
  nodes.push(el("span", { class: "label rowinfo", text: "capacity · load · PFC" }));
  for (const rail of railsBody.rails) {
    nodes.push(el("a", { class: "label", href: `#/rail/${rail.rail}`, text: `rail ${rail.rail}` }));
    for (const cell of rail.groups) {
      const key = `${rail.rail}:${cell.group}`;
      const inc = open.get(key);
      const status = stale ? "unknown" : worse(cell.status, inc ? inc.status : "healthy");
      const tip = [
        `rail ${rail.rail} · group ${cell.group}: ${stale ? "stale verdict" : status}`,
        ...cell.summaries,
        ...(inc ? [`incidents ${inc.ids.join(", ")}`] : []),
      ].join("\n");
      const cls = ["cell", status, cell.findings || inc ? "has" : "", marked && marked.has(key) ? "marked" : ""];
      nodes.push(
        el("a", {
          class: cls.filter(Boolean).join(" "),
          href: `#/rail/${rail.rail}?group=${cell.group}`,
          title: tip,
          "aria-label": tip.split("\n")[0],
          "data-rail": String(rail.rail),
          "data-group": String(cell.group),
          "data-status": status,
        }),
      );
    }
    const info = `${pct(rail.bottleneck_fraction)} · ${gbps(rail.load_gbps)} · ${pct(rail.pfc_pause_ratio, 2)}`;
    nodes.push(el("span", { class: `label rowinfo ${rail.status}`, text: info, title: rail.bottleneck || "" }));
  }
  target.replaceChildren(...nodes);
}

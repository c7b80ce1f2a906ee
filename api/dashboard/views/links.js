// Links by predicted time to failure (/v1/links/health, SPEC §10.5): soonest first, links without a
// trend last; each row opens the measured end's port view (its optics) over the trend window.

import { api, el, enc, link, section, table, td } from "../core.js";

function duration(s) {
  if (s === null || s === undefined) return "no trend";
  if (s >= 3600) return `${(s / 3600).toFixed(1)} h`;
  if (s >= 60) return `${Math.round(s / 60)} min`;
  return `${Math.round(s)} s`;
}

const fixed = (v, digits) => (v === null || v === undefined ? "–" : v.toFixed(digits));
const sci = (v) => (v === null || v === undefined ? "–" : v.toExponential(1));

export async function links() {
  const body = await api("/v1/links/health?limit=200");
  const rows = body.items.map((i) => el("tr", {
    class: i.time_to_failure_s === null ? "healthy" : i.time_to_failure_s <= 7200 ? "critical" : "degraded", "data-link": i.link },
  td(i.link),
  el("td", {}, link(`#/port/${enc(i.switch)}/${enc(i.port)}?range=6h`, `${i.switch}:${i.port}`)),
  td(i.peer || "–"), td(duration(i.time_to_failure_s), "num"), td(`${Math.round(i.confidence * 100)}%`, "num"),
  td(i.basis || "–"), td(fixed(i.evidence.rx_power_dbm, 2), "num"), td(fixed(i.evidence.laser_bias_ma, 2), "num"),
  td(sci(i.evidence.pre_fec_ber), "num"), td(sci(i.evidence.predicted_flr), "num")));
  const nodes = [el("div", { class: "page" }, section(`Links by predicted time to failure (${body.total})`,
    rows.length
      ? table(["link", "measured at (optics)", "peer", "fails in", "sure", "basis", "rx dBm", "bias mA", "pre-FEC BER", "predicted FLR"],
        rows, { id: "links-health" })
      : el("p", { class: "empty", text: "no link has transceiver or FEC data in the trend window" })))];
  return { nodes };
}

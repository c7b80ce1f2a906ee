// A port's optics, from /v1/optics over the port view's range: the transceiver's DOM series (rx and
// tx power, laser bias, temperature) with the module's thresholds drawn as dashed lines (amber
// warning, red critical; the configured critical where the module reports none), pre-FEC BER
// against its critical level, and the FEC histogram (codewords by symbol errors S0..S15, on a log
// scale) with the post-FEC frame loss it predicts. A port without optics data says so.

import { api, el, q, section } from "../core.js";
import { timeChart } from "../charts.js";

const WARNING = "#f0b13c";
const CRITICAL = "#e0483f";
const num = (digits, unit) => (v) => (v === null || v === undefined ? "–" : `${v.toFixed(digits)}${unit}`);
const ber = (v) => (v === null || v === undefined ? "–" : `1e${v.toFixed(1)}`);

// A threshold as a dashed series over the chart's times (none when the limit is unknown).
const line = (label, value, color, times) =>
  value === null || value === undefined ? [] : [{ label, values: times.map(() => value), color, dash: [6, 4] }];

function charts(body) {
  const th = body.thresholds;
  const domTimes = body.dom.map((p) => Date.parse(p.time) / 1000);
  const fecTimes = body.fec.map((p) => Date.parse(p.time) / 1000);
  const col = (points, key) => points.map((p) => p[key]);
  const rxSource = th.rx_from === "module" ? "module" : "configured";
  const biasSource = th.bias_from === "module" ? "module" : "configured";
  return [
    { id: "optics-rx", title: "rx power (dBm)", times: domTimes, yfmt: num(1, ""), series: [
      { label: "rx", values: col(body.dom, "rx_power_dbm") },
      ...line("low warning", th.rx_low_warning_dbm, WARNING, domTimes),
      ...line(`low critical (${rxSource})`, th.rx_low_critical_dbm, CRITICAL, domTimes)] },
    { id: "optics-tx", title: "tx power (dBm)", times: domTimes, yfmt: num(1, ""),
      series: [{ label: "tx", values: col(body.dom, "tx_power_dbm") }] },
    { id: "optics-bias", title: "laser bias (mA)", times: domTimes, yfmt: num(1, ""), series: [
      { label: "bias", values: col(body.dom, "laser_bias_ma") },
      ...line("high warning", th.bias_high_warning_ma, WARNING, domTimes),
      ...line(`high critical (${biasSource})`, th.bias_high_critical_ma, CRITICAL, domTimes)] },
    { id: "optics-temp", title: "module temperature (°C)", times: domTimes, yfmt: num(1, ""),
      series: [{ label: "temperature", values: col(body.dom, "temperature_c") }] },
    { id: "optics-ber", title: "pre-FEC BER (log10)", times: fecTimes, yfmt: ber, series: [
      { label: "pre-FEC BER", values: body.fec.map((p) => (p.pre_fec_ber > 0 ? Math.log10(p.pre_fec_ber) : null)) },
      ...line("critical (configured)", Math.log10(th.pre_fec_ber_critical), CRITICAL, fecTimes)] },
  ].filter((c) => c.times.length && c.series[0].values.some((v) => v !== null));
}

// The histogram as bars, each bin's height log10(count + 1) of the tallest.
function histogram(h) {
  if (!h) return el("p", { class: "empty", id: "fec-histogram-none", text: "no FEC histogram (the device counts no bins)" });
  const logs = h.bins.map((n) => Math.log10(n + 1));
  const top = Math.max(...logs, 1);
  const bars = h.bins.map((n, k) => el("div", { class: "bin", "data-bin": String(k), "data-count": String(n), title: `S${k}: ${n.toLocaleString()} codewords` },
    el("div", { class: "bar", style: `height: ${((100 * logs[k]) / top).toFixed(1)}%` }), el("span", { class: "label", text: `S${k}` })));
  const flr = h.predicted_flr === null ? "no prediction (too few bins counted)" : `predicted frame loss ${h.predicted_flr.toExponential(2)}`;
  return el("div", { id: "fec-histogram" },
    el("div", { class: "bins", role: "img", "aria-label": `FEC histogram, codewords by symbol errors S0 to S15; ${flr}` }, ...bars),
    el("p", { class: "hint", text: `codewords by symbol errors, log scale, ${new Date(h.start).toISOString().slice(11, 16)}–` +
      `${new Date(h.end).toISOString().slice(11, 16)} UTC · ${flr}` }));
}

// The optics panel of the port view: { node, after } (the charts draw once the node is placed).
export async function opticsSection(sw, name, range) {
  const url = `/v1/optics${q({ switch: sw, port: name, from: range.from, to: range.to })}`;
  const body = await api(url);
  const list = charts(body);
  if (!list.length && !body.histogram) {
    return { node: section("Optics", el("p", { class: "empty", id: "optics-none", text: "no transceiver or FEC data for this port in the range" })), after: [] };
  }
  const box = el("div", { class: "charts wide-charts", id: "optics-charts" });
  const th = body.thresholds;
  const facts = [body.component ? `transceiver ${body.component}` : null,
    `thresholds: rx ${th.rx_from}, bias ${th.bias_from}`].filter(Boolean).join(" · ");
  const node = el("section", { class: "panel wide", id: "optics" },
    el("h2", { text: "Optics" }), el("p", { class: "facts", text: facts }), box,
    el("h3", { text: "FEC histogram" }), histogram(body.histogram),
    el("p", { class: "hint" }, el("a", { href: "#/links", text: "all links by time to failure" })));
  const range_ = [Date.parse(range.from) / 1000, Date.parse(range.to) / 1000];
  const after = [() => list.forEach((c) =>
    timeChart(c.id, box, { title: c.title, times: c.times, series: c.series, sources: [url], yfmt: c.yfmt, range: range_, height: 160 }))];
  return { node, after };
}

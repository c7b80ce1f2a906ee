// Time-series charts on uPlot (vendor/uplot, loaded before this module as window.uPlot).
// Each chart keeps the exact API URLs it drew and their data, so a test can compare the points
// with the API, and the incident windows it shades.

import { el } from "./core.js";

const PALETTE = ["#5aa9ff", "#f0b13c", "#e0483f", "#2e9d5b", "#b07cff", "#4cc9c0", "#ff7eb6", "#c0c850"];
export const registry = (window.fabricmon = window.fabricmon || { charts: {}, renders: [] });

// Every chart drawn for the view on screen: destroyed before the next render replaces it (uPlot
// keeps each chart in a global list with window listeners until then).
const live = [];
export function destroyCharts() {
  while (live.length) live.pop().destroy();
}
registry.live = () => live.length;

// Shade [start, end] windows (unix seconds) behind the lines: the incidents on this element.
function shadePlugin(windows) {
  return {
    hooks: {
      drawClear: [
        (u) => {
          const { ctx } = u;
          const { top, height } = u.bbox;
          ctx.save();
          for (const w of windows) {
            ctx.fillStyle = w.infinite ? "rgba(224, 72, 63, 0.55)" : w.wide ? "rgba(224, 165, 38, 0.14)" : "rgba(224, 72, 63, 0.18)";
            const x0 = u.valToPos(Math.max(w.start, u.scales.x.min), "x", true);
            const x1 = u.valToPos(Math.min(w.end, u.scales.x.max), "x", true);
            if (x1 > x0) ctx.fillRect(x0, top, x1 - x0, height);
          }
          ctx.restore();
        },
      ],
    },
  };
}

// Gaps of at most `bridgeS` seconds (a sample or an evaluation that fell into the next bucket) are
// drawn across; longer ones (a collector or analyzer away) stay gaps.
function bridged(bridgeS) {
  return (u, sidx, idx0, idx1, gaps) => {
    if (!bridgeS) return gaps;
    const px = Math.abs(u.valToPos(u.scales.x.min + bridgeS, "x", true) - u.valToPos(u.scales.x.min, "x", true));
    return gaps.filter(([a, b]) => b - a > px + 1);
  };
}

// Time labels in UTC, as precise as the span needs: 05:57:30, 05:57, 12-02 05:57, 12-02.
function utcLabels(u, splits) {
  const span = u.scales.x.max - u.scales.x.min;
  const [from, to] = span > 2 * 86400 ? [5, 10] : span > 86400 ? [5, 16] : span < 600 ? [11, 19] : [11, 16];
  return splits.map((t) => new Date(t * 1000).toISOString().slice(from, to).replace("T", " "));
}

// The bucket width of aligned times: the smallest step between two of them.
const stepOf = (times) => times.reduce((m, t, i) => (i && t - times[i - 1] < m ? t - times[i - 1] : m), Infinity);

// A chart of aligned series: times (unix s) and one array per series, nulls are gaps. A series may
// have its own color and a dash pattern (a threshold line).
export function timeChart(id, target, { title, times, series, shade = [], sources = [], yfmt, height = 180, range, bridge }) {
  const step = stepOf(times);
  if (bridge === undefined) bridge = Number.isFinite(step) ? 3 * step : 0;
  const width = Math.max(240, target.clientWidth || 600);
  const opts = {
    title,
    width,
    height,
    tzDate: (ts) => window.uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"),
    cursor: { drag: { x: true, y: false } },
    scales: { x: { time: true, ...(range ? { range: () => range } : {}) } },
    axes: [
      { stroke: "#8a99ab", grid: { stroke: "#263140" }, values: utcLabels },
      { stroke: "#8a99ab", grid: { stroke: "#263140" }, size: 60, values: yfmt ? (u, vals) => vals.map(yfmt) : undefined },
    ],
    series: [
      {},
      ...series.map((s, i) => ({
        label: s.label,
        stroke: s.color || PALETTE[i % PALETTE.length],
        width: 1.5,
        dash: s.dash,
        spanGaps: false,
        gaps: bridged(bridge),
        points: s.dash ? { show: false } : { size: 4 },
        value: yfmt ? (u, v) => (v === null || v === undefined ? "–" : yfmt(v)) : undefined,
      })),
    ],
    plugins: [shadePlugin(shade)],
  };
  const data = [times, ...series.map((s) => s.values)];
  const box = el("div", { class: "chart", "data-chart": id });
  target.append(box);
  const plot = new window.uPlot(opts, data, box);
  live.push(plot);
  registry.charts[id] = { sources, data, shade, labels: series.map((s) => s.label) };
  return plot;
}

// A small line for a table cell: no axes, no legend.
export function sparkline(target, times, values) {
  const opts = {
    width: 120,
    height: 26,
    pxAlign: false,
    cursor: { show: false },
    select: { show: false },
    legend: { show: false },
    scales: { x: { time: false } },
    axes: [{ show: false }, { show: false }],
    series: [{}, { stroke: PALETTE[0], width: 1 }],
  };
  const plot = new window.uPlot(opts, [times, values], target);
  live.push(plot);
  return plot;
}

// /v1/series bodies (points of ISO times) as aligned columns.
export function alignSeries(bodies) {
  const times = [...new Set(bodies.flatMap((b) => b.points.map((p) => Date.parse(p.time) / 1000)))].sort((a, b) => a - b);
  const index = new Map(times.map((t, i) => [t, i]));
  const columns = bodies.map((b) => {
    const col = new Array(times.length).fill(null);
    for (const p of b.points) col[index.get(Date.parse(p.time) / 1000)] = p.value;
    return col;
  });
  return { times, columns };
}

// Incident windows to shade, widened to whole buckets of `step` s: a point is drawn at its bucket's
// start, so the bucket an incident opened in lies inside its window. `wide`: a switch-wide incident.
export const incidentWindows = (incidents, step = 0, wide = false) =>
  incidents.map((a) => {
    const start = Date.parse(a.started_at) / 1000;
    const end = (a.ended_at ? Date.parse(a.ended_at) : Date.now()) / 1000;
    return { id: a.id, wide, start: step ? Math.floor(start / step) * step : start, end: step ? Math.ceil(end / step) * step : end };
  });

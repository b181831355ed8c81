// Sparklines: a GPU's last ten minutes (GET /v1/gpus/samples) as small inline SVG lines,
// drawn over the whole window (a GPU sampled for 2 minutes fills the right fifth).
import { h, s } from "./ui.js";

const W = 240, H = 36;

// points: [[unix seconds, value or null], ...] oldest first; max: the top of the scale.
export function sparkline(points, { now, window, max, label, text, cls }) {
  const known = points.filter(([, v]) => v !== null && v !== undefined);
  const top = Math.max(max || 0, 1, ...known.map(([, v]) => v));
  const px = (t) => W - ((now - t) / window) * W;
  const py = (v) => H - 2 - (v / top) * (H - 4);
  // A gap in the samples (an unknown value) breaks the line.
  const runs = [];
  let run = [];
  for (const [t, v] of points) {
    if (v === null || v === undefined) {
      if (run.length) runs.push(run);
      run = [];
    } else {
      run.push(`${Math.max(0, px(t)).toFixed(1)},${py(v).toFixed(1)}`);
    }
  }
  if (run.length) runs.push(run);
  const last = known.length ? known[known.length - 1][1] : null;
  return h("div", { class: `spark ${cls || ""}` },
    h("span", { class: "spark-label" }, label, " ", h("span", { class: "spark-value" }, text(last))),
    s("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img",
      "aria-label": known.length
        ? `${label}, last ${Math.round(window / 60)} minutes: ${known.length} samples, ` +
          `now ${text(last)}, peak ${text(Math.max(...known.map(([, v]) => v)))}`
        : `${label}: no samples yet` },
    s("line", { class: "axis", x1: 0, y1: H - 1, x2: W, y2: H - 1 }),
    ...runs.map((r) => (r.length === 1
      ? s("circle", { cx: r[0].split(",")[0], cy: r[0].split(",")[1], r: 1.5, class: "spark-line" })
      : s("polyline", { points: r.join(" "), class: "spark-line", fill: "none" })))));
}

// The three lines of one GPU's card, from its entry of GET /v1/gpus/samples.
export function gpuSparks(entry, now, window) {
  const pts = (key) => (entry ? entry.samples : []).map((p) => [p.time, p[key]]);
  const wrap = h("div", { class: "sparks", "data-samples": entry ? entry.samples.length : 0 });
  wrap.append(
    sparkline(pts("utilization_gpu"), { now, window, max: 100, label: "Utilisation",
      text: (v) => (v === null ? "?" : `${v} %`), cls: "spark-util" }),
    sparkline(pts("memory_used_mib"), { now, window, max: entry ? entry.memory_total_mib : 0,
      label: "Memory", text: (v) => (v === null ? "?" : `${v} MiB`), cls: "spark-mem" }),
    sparkline(pts("power_w"), { now, window, max: 0, label: "Power",
      text: (v) => (v === null ? "?" : `${v} W`), cls: "spark-power" }));
  return wrap;
}

// History: what gstats shows, for a chosen period: jobs per user and per GPU (a stacked
// bar chart of how they ended and a table) and the GPUs' sampled utilisation (lines).
import { api, fmtDuration, h, notice, s } from "./ui.js";

const ENDINGS = [["completed", "st-CD", "finished"], ["failed", "st-F", "failed"],
  ["cancelled", "st-CA", "cancelled"], ["timeout", "st-TO", "timed out"],
  ["running", "st-R", "running"]];
const PERIODS = [["1", "last day"], ["7", "last 7 days"], ["30", "last 30 days"]];
let days = "7";

function barChart(groups, label) {
  if (!groups.length) return h("p", { class: "muted" }, "No jobs in this period.");
  const max = Math.max(1, ...groups.map((g) => ENDINGS.reduce((n, [k]) => n + (g[k] || 0), 0)));
  const BAR = 22, LEFT = 120, WIDTH = 420;
  const rows = groups.map((g, i) => {
    let x = LEFT;
    const segs = ENDINGS.map(([k, cls]) => {
      const w = ((g[k] || 0) / max) * WIDTH;
      const r = s("rect", { x, y: i * (BAR + 6), width: w, height: BAR, class: cls, fill: "currentColor" });
      x += w;
      return r;
    });
    return s("g", null, s("text", { x: 0, y: i * (BAR + 6) + 15 }, g.name), ...segs,
      s("text", { x: x + 6, y: i * (BAR + 6) + 15 }, String(g.jobs)));
  });
  return h("figure", null,
    s("svg", { width: LEFT + WIDTH + 60, height: groups.length * (BAR + 6), class: "fit",
      viewBox: `0 0 ${LEFT + WIDTH + 60} ${groups.length * (BAR + 6)}`, role: "img",
      "aria-label": `${label}: ` + groups.map((g) => `${g.name} ${g.jobs} jobs`).join(", ") }, ...rows),
    h("figcaption", { class: "legend" }, ENDINGS.map(([, cls, name]) =>
      h("span", null, h("span", { class: `swatch ${cls}` }), name))));
}

function table(groups, total, first) {
  const cols = [[first, (g) => g.name], ["Jobs", (g) => g.jobs], ["Finished", (g) => g.completed],
    ["Failed", (g) => g.failed], ["Cancelled", (g) => g.cancelled], ["Timeout", (g) => g.timeout],
    ["GPU hours", (g) => (g.gpu_hours ?? 0).toFixed(1)],
    ["Mean wait", (g) => fmtDuration(g.wait_mean_secs)],
    ["p95 wait", (g) => fmtDuration(g.wait_p95_secs)],
    ["Mean run", (g) => fmtDuration(g.run_mean_secs)],
    ["Failure rate", (g) => (g.failure_rate === null ? "—" : `${Math.round(g.failure_rate * 100)} %`)]];
  const tr = (g, tag) => h("tr", null, cols.map(([, f], i) =>
    h(i === 0 ? "th" : tag, i === 0 ? { scope: "row" } : null, f(g))));
  return h("div", { class: "table-wrap" }, h("table", null,
    h("thead", null, h("tr", null, cols.map(([c]) => h("th", { scope: "col" }, c)))),
    h("tbody", null, groups.map((g) => tr(g, "td"))),
    total ? h("tfoot", null, tr({ ...total, name: "total" }, "td")) : null));
}

// Ticks of the time axis: the first step that gives at most 6 of them, on local round
// hours or local midnights.
const STEPS = [600, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 2 * 86400, 7 * 86400];
function timeTicks(since, until) {
  const step = STEPS.find((st) => (until - since) / st <= 6) || STEPS[STEPS.length - 1];
  const d = new Date(since * 1000);
  if (step >= 86400) d.setHours(0, 0, 0, 0); else d.setMinutes(0, 0, 0);
  let t = d.getTime() / 1000;
  while (t < since) t += step;
  const ticks = [];
  for (; t <= until; t += step) {
    const at = new Date(t * 1000);
    const label = step >= 86400
      ? at.toLocaleDateString(undefined, { month: "short", day: "numeric" })
      : at.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
    ticks.push([t, label]);
  }
  return ticks;
}

// A label near the right edge ends at its tick, so that it is not cut off.
function timeAxis(since, until, px, y, right) {
  return s("g", { class: "time-axis", "aria-hidden": "true" },
    ...timeTicks(since, until).flatMap(([t, label]) => [
      s("line", { class: "axis", x1: px(t).toFixed(1), y1: y, x2: px(t).toFixed(1), y2: y + 4 }),
      s("text", { x: px(t).toFixed(1), y: y + 16, "text-anchor": px(t) > right - 40 ? "end" : "middle",
        "data-time": t }, label)]));
}

function utilChart(r) {
  const gpus = (r.gpus || []).filter((g) => g.series && g.series.length);
  if (!gpus.length) return h("p", { class: "muted" }, "No utilisation samples in this period.");
  const W = 560, H = 180, span = r.until - r.since;
  const px = (t) => 40 + ((t - r.since) / span) * (W - 50);
  const py = (v) => H - 40 - (v / 100) * (H - 50);
  // A line per GPU, with a dot per slice (a slice alone makes no line).
  const lines = gpus.map((g, i) => {
    const color = `hsl(${(i * 83) % 360} 70% 50%)`;
    const pts = g.series.map((p) => [px(p.start + r.bucket_secs / 2), py(p.mean)]);
    return s("g", null, s("polyline", { fill: "none", "stroke-width": 2, stroke: color,
      points: pts.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" ") }),
    ...pts.map(([x, y]) => s("circle", { cx: x.toFixed(1), cy: y.toFixed(1), r: 3, fill: color })));
  });
  return h("figure", null,
    s("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, class: "fit", role: "img",
      "aria-label": `GPU utilisation from ${new Date(r.since * 1000).toLocaleString()} to ` +
        `${new Date(r.until * 1000).toLocaleString()}: ` +
        gpus.map((g) => `GPU ${g.index} mean ${Math.round(g.mean)} percent`).join(", ") },
    s("line", { class: "axis", x1: 40, y1: H - 40, x2: W, y2: H - 40 }),
    s("line", { class: "axis", x1: 40, y1: 10, x2: 40, y2: H - 40 }),
    s("text", { x: 0, y: 16 }, "100%"), s("text", { x: 8, y: H - 40 }, "0%"),
    timeAxis(r.since, r.until, px, H - 40, W), ...lines),
    h("figcaption", { class: "legend" }, gpus.map((g, i) => h("span", null,
      h("span", { class: "swatch", "data-hue": i }), `GPU ${g.index} (mean ${Math.round(g.mean)} %)`))));
}

export function historyPage(main) {
  const body = h("div", { id: "history" });
  const period = h("select", { id: "history-period", onchange: (e) => { days = e.target.value; load(); } },
    PERIODS.map(([v, l]) => h("option", { value: v, selected: v === days }, l)));
  main.replaceChildren(h("h1", null, "History"),
    h("div", { class: "filters" }, h("label", null, "Period", period)), body);
  let stopped = false;
  const load = async () => {
    // Until the daemon's now (the default): a job that ended a moment ago counts.
    // Everyone's jobs (the API's default is the caller's, as gflow's gstats).
    const q = `since=${Math.floor(Date.now() / 1000) - Number(days) * 86400}`;
    try {
      const [users, gpus, util] = await Promise.all([api("GET", `/v1/stats?${q}&user=all&by=user`),
        api("GET", `/v1/stats?${q}&user=all&by=gpu`), api("GET", `/v1/stats?${q}&gpu=1&buckets=48`)]);
      if (stopped) return;
      body.replaceChildren(
        h("h2", null, "Jobs per user"), barChart(users.groups, "jobs per user"),
        table(users.groups, users.total, "User"),
        h("h2", null, "Jobs per GPU"), table(gpus.groups, null, "GPU"),
        h("h2", null, "GPU utilisation"), utilChart(util));
      body.querySelectorAll(".swatch[data-hue]").forEach((el) => {
        el.style.background = `hsl(${(Number(el.dataset.hue) * 83) % 360} 70% 50%)`;
      });
    } catch (e) {
      notice(e.message);
    }
  };
  load();
  return () => { stopped = true; };
}

// One job: its fields, its dependencies as a small graph, the live tail of its log and
// the buttons of gcancel / gjob hold / release / redo (each asks first).
import { api, confirmDialog, fmtDuration, fmtTime, h, jobState, notice, s, stateBadge } from "./ui.js";
import { subscribe } from "./events.js";

const LOG_KEEP = 200000; // characters of the log kept on the page

function depGraph(j) {
  const before = j.depends_on || [];
  const after = (j.dependents || []).map((id) => ({ id }));
  if (!before.length && !after.length) return h("p", { class: "muted" }, "No dependencies.");
  const W = 130, H = 30, GAP = 12, COLX = [10, 220, 430];
  const rows = Math.max(before.length, after.length, 1);
  const height = rows * (H + GAP) + GAP;
  const y = (i, n) => GAP + i * (H + GAP) + ((rows - n) * (H + GAP)) / 2;
  const node = (x, yy, label, href, self) => {
    const g = s("g", { class: self ? "node self" : "node" },
      s("rect", { x, y: yy, width: W, height: H, rx: 6 }),
      s("text", { x: x + 10, y: yy + 19 }, label));
    return href ? s("a", { href, "aria-label": label }, g) : g;
  };
  const selfY = y(0, 1);
  const parts = [];
  before.forEach((d, i) => {
    const yy = y(i, before.length);
    parts.push(s("path", { class: "edge", d: `M${COLX[0] + W} ${yy + H / 2} L${COLX[1]} ${selfY + H / 2}`,
      "marker-end": "url(#arrow)" }));
    parts.push(node(COLX[0], yy, `${d.id} ${d.kind || ""} ${d.status || ""}`.trim(), `#/job/${d.id}`));
  });
  after.forEach((d, i) => {
    const yy = y(i, after.length);
    parts.push(s("path", { class: "edge", d: `M${COLX[1] + W} ${selfY + H / 2} L${COLX[2]} ${yy + H / 2}`,
      "marker-end": "url(#arrow)" }));
    parts.push(node(COLX[2], yy, `job ${d.id}`, `#/job/${d.id}`));
  });
  parts.push(node(COLX[1], selfY, `job ${j.id} (${jobState(j)})`, null, true));
  return s("svg", { width: COLX[2] + W + 10, height, viewBox: `0 0 ${COLX[2] + W + 10} ${height}`,
    class: "fit", role: "img",
    "aria-label": `dependencies: waits for ${before.map((d) => d.id).join(", ") || "none"}; ` +
      `needed by ${after.map((d) => d.id).join(", ") || "none"}` },
  s("defs", null, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5,
    markerWidth: 6, markerHeight: 6, orient: "auto-start-reverse" },
  s("path", { d: "M0 0 L10 5 L0 10 z", class: "edge" }))), ...parts);
}

const known = (v) => v !== null && v !== undefined;

// The job's GPU use and energy (null until measured, absent from older daemons).
function gpuUse(j) {
  const util = known(j.gpu_util_mean) || known(j.gpu_util_peak)
    ? `${j.gpu_util_mean ?? "?"} % mean, ${j.gpu_util_peak ?? "?"} % peak` : null;
  return [
    ["GPU use", util, "gpu_util"],
    ["GPU memory peak", known(j.gpu_mem_peak_mb) ? `${(j.gpu_mem_peak_mb / 1024).toFixed(1)} GiB` : null,
      "gpu_mem_peak"],
    ["Energy", known(j.energy_wh) ? `${Number(j.energy_wh).toFixed(1)} Wh` : null, "energy"],
    ["Idle GPUs", j.gpu_idle === true ? "yes: it held GPUs and used under 5 % of them" : null,
      "gpu_idle"],
  ];
}

// Why it failed, as read from the end of its log: the class and the line that matched.
function triage(j) {
  if (!j.failure_class) return null;
  return h("div", { class: "triage", id: "job-triage", role: "note" },
    h("strong", null, j.failure_class),
    j.failure_line ? h("code", null, j.failure_line) : null);
}

function fields(j) {
  const rows = [
    ["State", stateBadge(jobState(j))], ["Slurm job", j.slurm_id], ["Name", j.name],
    ["User", j.user],
    ["Reason", j.reason], ["Command", j.command || j.script_path], ["Workdir", j.workdir],
    ["GPUs", j.gpu_ids ? `${j.gpus} (${j.gpu_ids})` : j.gpus],
    ["Priority", j.priority], ["Time limit", j.time_limit ? fmtDuration(j.time_limit) : "none"],
    ["Submitted", fmtTime(j.submit_time)], ["Started", fmtTime(j.start_time)],
    ["Ended", fmtTime(j.end_time)],
    ["Expected start", j.expected_start ? fmtTime(j.expected_start) : null],
    ["Exit code", j.exit_code], ["Signal", j.signal_name],
    ["Failure", j.failure_class, "failure_class"], ["Failure line", j.failure_line, "failure_line"],
    ...gpuUse(j),
    ["Project", j.project], ["Log", j.log_path],
  ];
  return h("dl", { class: "fields" }, rows.filter(([, v]) => v !== null && v !== undefined && v !== "")
    .flatMap(([k, v, key]) => [h("dt", null, k), h("dd", { "data-field": key || k.toLowerCase() }, v)]));
}

// Streams the log (GET /v1/jobs/{id}/log?follow=1) into pre until the job has ended.
async function tailLog(id, pre, signal) {
  const dec = new TextDecoder();
  try {
    const r = await fetch(`/v1/jobs/${id}/log?follow=1`, { signal, credentials: "same-origin" });
    if (!r.ok) { pre.textContent = `(log unavailable: HTTP ${r.status})`; return; }
    const reader = r.body.getReader();
    let text = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text = (text + dec.decode(value, { stream: true })).slice(-LOG_KEEP);
      const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.textContent = text;
      if (atEnd) pre.scrollTop = pre.scrollHeight;
    }
    if (!text) pre.textContent = "(empty log)";
  } catch (e) {
    if (e.name !== "AbortError") pre.textContent += `\n(log stream stopped: ${e.message})`;
  }
}

// Held here (H), or in Slurm: shown PD with Slurm's reason JobHeldUser (gjob release
// runs scontrol release there).
const held = (j) => j.state === "H" || (j.state === "PD" && /JobHeldUser/.test(j.reason || ""));

const ACTIONS = [
  ["cancel", "Cancel", (j) => ["PD", "H", "R"].includes(j.state) && !j.cancelling, "Cancel job"],
  ["hold", "Hold", (j) => j.state === "PD" && !held(j), "Hold job"],
  ["release", "Release", held, "Release job"],
  ["redo", "Redo", () => true, "Submit a new job like job"],
];

export function jobPage(main, id) {
  const box = h("div", { id: "job-fields" });
  const actions = h("div", { class: "actions", role: "group", "aria-label": "job actions" });
  const graph = h("div");
  const pre = h("pre", { class: "log", id: "job-log", tabindex: 0, "aria-label": "job log" });
  main.replaceChildren(h("h1", null, `Job ${id}`), actions, box,
    h("h2", null, "Dependencies"), graph, h("h2", null, "Log"), pre);
  let stopped = false;
  const load = async () => {
    let j;
    try {
      j = await api("GET", `/v1/jobs/${id}`);
    } catch (e) {
      box.replaceChildren(h("p", null, e.message));
      return;
    }
    if (stopped) return;
    box.replaceChildren(...[triage(j), fields(j)].filter(Boolean));
    graph.replaceChildren(depGraph(j));
    actions.replaceChildren(...ACTIONS.filter(([, , ok]) => ok(j)).map(([act, label, , q]) =>
      h("button", { type: "button", id: `job-${act}`, class: act === "cancel" ? "danger" : null,
        onclick: async () => {
          let also = "";
          if (act === "cancel") {
            // What the cancel takes along (dependents that could then never run).
            const dry = await api("POST", `/v1/jobs/${j.id}/cancel?dry_run=1`).catch(() => null);
            const ids = ((dry && dry.dependents_cancelled) || []).map((d) => d.id);
            if (ids.length) also = ` This also cancels the jobs that depend on it: ${ids.join(", ")}.`;
          }
          if (!(await confirmDialog(`${q} ${j.id} (${j.name || j.command || ""})?${also}`))) return;
          try {
            const r = await api("POST", `/v1/jobs/${j.id}/${act}`, act === "redo" ? {} : undefined);
            if (act === "redo") location.hash = `#/job/${r.jobs[0].id}`;
            else notice(`job ${j.id}: ${r.state}`);
          } catch (e) {
            notice(`${label} failed: ${e.message}`);
          }
          load();
        } }, label)));
  };
  load();
  const abort = new AbortController();
  tailLog(id, pre, abort.signal);
  const unsub = subscribe((type, data) => {
    if (type === "resync" || (type.startsWith("job_") && data && data.id === Number(id))) load();
  });
  return () => { stopped = true; abort.abort(); unsub(); };
}

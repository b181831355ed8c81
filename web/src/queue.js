// The queue: everyone's jobs (active ones, or the recent ones of every state), filtered
// and sorted in the page, read again on every job event (no reload). An array's tasks
// are one row with their counts by state until it is opened. Rows are made a chunk at
// a time as the table is scrolled, so that 10,000 jobs draw as fast as 200. Checked jobs
// are cancelled, held or released in one request (POST /v1/jobs/cancel|hold|release).
import { api, confirmDialog, fmtDuration, fmtTime, h, jobState, notice, stateBadge } from "./ui.js";
import { subscribe } from "./events.js";

// [key, label, sortable]
const COLUMNS = [
  ["id", "ID"], ["slurm_id", "Slurm ID"], ["name", "Name"], ["user", "User"], ["state", "State"],
  ["gpus", "GPUs"], ["elapsed", "Elapsed"], ["wait", "Wait"],
  ["reason", "Reason"], ["expected_start", "Expected start"], ["submit_time", "Submitted"],
  ["command", "Command"],
];
const CHUNK = 60; // rows made at a time: a screenful and some more
const STATE_ORDER = ["R", "CG", "PD", "H", "CD", "F", "CA", "TO"];

const view = { scope: "active", text: "", sortKey: "id", desc: false, open: new Set() };
const now = () => Date.now() / 1000;

// Running (or ended): how long it ran. Queued or held: nothing.
function elapsed(j, t) {
  if (!j.start_time) return null;
  return (j.end_time || t) - j.start_time;
}

// Queued or held: how long it has waited so far; started: how long it waited.
function waited(j, t) {
  if (!j.submit_time) return null;
  return (j.start_time || (j.end_time ? j.end_time : t)) - j.submit_time;
}

function value(j, key, t) {
  if (key === "state") return jobState(j);
  if (key === "gpus") return j.gpu_ids || j.gpus || 0;
  if (key === "command") return j.command || j.script_path || "";
  if (key === "elapsed") return elapsed(j, t);
  if (key === "wait") return waited(j, t);
  return j[key];
}

// Sort keys, made once per row: numbers stay numbers, the rest lower-cased text.
function key(v) {
  if (v === null || v === undefined || typeof v === "number") return v;
  return String(v).toLowerCase();
}

// Nulls last; numbers before text; text by code point (a collator's compare costs ten
// times as much, and 10,000 rows take 130,000 comparisons).
function cmp(a, b) {
  if (a === b) return 0;
  if (a === null || a === undefined) return 1;
  if (b === null || b === undefined) return -1;
  const na = typeof a === "number", nb = typeof b === "number";
  if (na && nb) return a - b;
  if (na !== nb) return na ? -1 : 1;
  return a < b ? -1 : 1;
}

// The jobs as rows: a job alone, or an array (its tasks, by group_id) as one item.
function items(jobs) {
  const out = [];
  const groups = new Map();
  for (const j of jobs) {
    if (j.array_task === null || j.array_task === undefined || !j.group_id) {
      out.push({ job: j });
      continue;
    }
    let g = groups.get(j.group_id);
    if (!g) {
      g = { group: j.group_id, tasks: [] };
      groups.set(j.group_id, g);
      out.push(g);
    }
    g.tasks.push(j);
  }
  // An "array" of one shown task is shown as that task.
  return out.map((it) => (it.tasks && it.tasks.length === 1 ? { job: it.tasks[0] } : it));
}

function counts(tasks) {
  const c = {};
  for (const j of tasks) c[jobState(j)] = (c[jobState(j)] || 0) + 1;
  return STATE_ORDER.filter((s) => c[s]).map((s) => [s, c[s]]);
}

// A duration cell that the page's clock moves on (data-from: where it counts from).
function clockCell(field, secs, from) {
  return h("td", { "data-field": field, "data-from": from }, secs === null ? "" : fmtDuration(secs));
}

function jobRow(j, t, sel, task) {
  const run = j.start_time && !j.end_time;
  const queued = !j.start_time && !j.end_time;
  return h("tr", { "data-job": j.id, class: task ? "task" : null },
    h("td", { class: "sel" }, h("input", { type: "checkbox", "data-id": j.id,
      "aria-label": `select job ${j.id}`, checked: sel.has(j.id) })),
    h("td", null, h("a", { href: `#/job/${j.id}` }, String(j.id))),
    h("td", { "data-field": "slurm_id" }, j.slurm_id ? String(j.slurm_id) : ""),
    h("td", null, j.name || ""), h("td", null, j.user),
    h("td", null, stateBadge(jobState(j))),
    h("td", null, j.gpu_ids || String(j.gpus || 0)),
    clockCell("elapsed", elapsed(j, t), run ? j.start_time : null),
    clockCell("wait", waited(j, t), queued ? j.submit_time : null),
    h("td", null, j.reason || ""),
    h("td", null, j.expected_start ? fmtTime(j.expected_start) : ""),
    h("td", null, fmtTime(j.submit_time)),
    h("td", { class: "cmd", title: value(j, "command") }, value(j, "command")));
}

function groupRow(g, t, sel) {
  const first = g.tasks[0];
  const open = view.open.has(g.group);
  const all = g.tasks.every((j) => sel.has(j.id));
  const some = !all && g.tasks.some((j) => sel.has(j.id));
  const box = h("input", { type: "checkbox", "data-group": g.group, checked: all,
    "aria-label": `select the ${g.tasks.length} shown tasks of array ${g.group}` });
  box.indeterminate = some;
  const run = g.tasks.filter((j) => j.start_time && !j.end_time);
  const queued = g.tasks.filter((j) => !j.start_time && !j.end_time);
  // The longest of the tasks', counting on from its start (or submission).
  const earliest = (list, f) => (list.length ? Math.min(...list.map(f)) : null);
  const ranFrom = earliest(run, (j) => j.start_time), waitFrom = earliest(queued, (j) => j.submit_time);
  return h("tr", { "data-group": g.group, class: "array" },
    h("td", { class: "sel" }, box),
    h("td", null, h("button", { type: "button", class: "expand", "data-group": g.group,
      "aria-expanded": open ? "true" : "false" }, `${open ? "▾" : "▸"} ${g.group}[${g.tasks.length}]`)),
    h("td"), h("td", null, (first.name || "").replace(/_\d+$/, "")), h("td", null, first.user),
    h("td", { class: "counts", "data-counts": counts(g.tasks).map(([s, n]) => `${s}:${n}`).join(" ") },
      ...counts(g.tasks).flatMap(([s, n]) => [stateBadge(s), ` ${n} `])),
    h("td", null, String(first.gpus || 0)),
    clockCell("elapsed", ranFrom === null ? null : t - ranFrom, ranFrom),
    clockCell("wait", waitFrom === null ? null : t - waitFrom, waitFrom),
    h("td", null, `${g.tasks.length} tasks`),
    h("td"), h("td", null, fmtTime(first.submit_time)),
    h("td", { class: "cmd", title: value(first, "command") }, value(first, "command")));
}

export function queuePage(main) {
  let jobs = [];
  let rows = []; // what the table shows, in order: {job} | {group, tasks} | {job, task: true}
  let made = 0;  // rows made so far
  const selected = new Set();
  const tbody = h("tbody");
  const count = h("p", { class: "muted", role: "status" });
  const headRow = h("tr");
  const more = h("button", { type: "button", id: "queue-more", onclick: () => grow() }, "Show more");
  const foot = h("p", { class: "more" }, more);
  const selCount = h("span", { id: "queue-selected" }, "0 selected");
  const bulkButtons = [["cancel", "Cancel", "danger"], ["hold", "Hold"], ["release", "Release"]]
    .map(([act, label, cls]) => h("button", { type: "button", id: `bulk-${act}`, class: cls,
      disabled: true, onclick: () => bulk(act, label) }, label));
  const allBox = h("input", { type: "checkbox", id: "queue-select-all",
    "aria-label": "select all shown jobs" });

  // The jobs the filter lets through (every task of an array, opened or not).
  let shownJobs = [];
  const grow = () => {
    const t = now();
    const frag = document.createDocumentFragment();
    const end = Math.min(rows.length, made + CHUNK);
    for (; made < end; made++) {
      const r = rows[made];
      frag.append(r.tasks ? groupRow(r, t, selected) : jobRow(r.job, t, selected, r.task));
    }
    tbody.append(frag);
    foot.hidden = made >= rows.length;
    more.textContent = `Show more (${rows.length - made} rows left)`;
  };
  const syncSelection = () => {
    // A job that left the list (ended, in the active view) is no longer selected.
    const ids = new Set(jobs.map((j) => j.id));
    for (const id of [...selected]) if (!ids.has(id)) selected.delete(id);
    selCount.textContent = `${selected.size} selected`;
    for (const b of bulkButtons) b.disabled = selected.size === 0;
    allBox.checked = shownJobs.length > 0 && shownJobs.every((j) => selected.has(j.id));
    allBox.indeterminate = !allBox.checked && shownJobs.some((j) => selected.has(j.id));
    // The arrays' boxes made so far: checked when all their tasks are, dashed when some.
    for (const box of tbody.querySelectorAll("tr.array input[data-group]")) {
      const g = rows.find((r) => r.group === Number(box.dataset.group));
      if (!g) continue;
      const n = g.tasks.filter((j) => selected.has(j.id)).length;
      box.checked = n === g.tasks.length;
      box.indeterminate = n > 0 && n < g.tasks.length;
    }
  };
  const draw = () => {
    const t = now();
    const q = view.text.toLowerCase();
    const match = (j) => !q || [j.id, j.name, j.user, j.command, j.reason, jobState(j)]
      .some((v) => v !== null && v !== undefined && String(v).toLowerCase().includes(q));
    shownJobs = jobs.filter(match);
    const list = items(shownJobs);
    // Keys are read once per row, not once per comparison.
    const keyed = list.map((it) => [key(value(it.job || it.tasks[0], view.sortKey, t)), it]);
    const dir = view.desc ? -1 : 1;
    keyed.sort((a, b) => cmp(a[0], b[0]) * dir);
    rows = [];
    for (const [, it] of keyed) {
      rows.push(it);
      if (it.tasks && view.open.has(it.group)) for (const j of it.tasks) rows.push({ job: j, task: true });
    }
    tbody.replaceChildren();
    made = 0;
    grow();
    const arrays = list.filter((it) => it.tasks).length;
    count.textContent = `${shownJobs.length} of ${jobs.length} jobs` +
      (arrays ? ` (${arrays} array${arrays > 1 ? "s" : ""} in one row each)` : "");
    headRow.replaceChildren(h("th", { scope: "col", class: "sel" }, allBox),
      ...COLUMNS.map(([key, label]) => h("th", {
        scope: "col",
        "aria-sort": view.sortKey === key ? (view.desc ? "descending" : "ascending") : "none",
      }, h("button", { type: "button", "data-sort": key, onclick: () => {
        view.desc = view.sortKey === key ? !view.desc : false;
        view.sortKey = key;
        draw();
      } }, label, view.sortKey === key ? (view.desc ? " ▼" : " ▲") : ""))));
    syncSelection();
  };

  // One listener for the whole table: checkboxes and the arrays' open buttons.
  tbody.addEventListener("click", (e) => {
    const open = e.target.closest("button.expand");
    if (!open) return;
    const g = Number(open.dataset.group);
    if (view.open.has(g)) view.open.delete(g); else view.open.add(g);
    draw();
  });
  tbody.addEventListener("change", (e) => {
    const box = e.target;
    if (box.dataset.id) {
      if (box.checked) selected.add(Number(box.dataset.id)); else selected.delete(Number(box.dataset.id));
    } else if (box.dataset.group) {
      const g = rows.find((r) => r.group === Number(box.dataset.group));
      for (const j of g ? g.tasks : []) if (box.checked) selected.add(j.id); else selected.delete(j.id);
      for (const c of tbody.querySelectorAll("tr.task input[data-id]")) c.checked = selected.has(Number(c.dataset.id));
    }
    syncSelection();
  });
  allBox.addEventListener("change", () => {
    for (const j of shownJobs) if (allBox.checked) selected.add(j.id); else selected.delete(j.id);
    for (const c of tbody.querySelectorAll("input[type=checkbox]")) {
      c.checked = allBox.checked;
      c.indeterminate = false;
    }
    syncSelection();
  });

  const bulk = async (act, label) => {
    const ids = [...selected].sort((a, b) => a - b);
    if (!ids.length) return;
    const list = ids.length > 10 ? `${ids.slice(0, 10).join(", ")} and ${ids.length - 10} more` : ids.join(", ");
    if (!(await confirmDialog(`${label} ${ids.length} job${ids.length > 1 ? "s" : ""} (${list})?`))) return;
    try {
      const r = await api("POST", `/v1/jobs/${act}`, { ids });
      const refused = r.results.filter((x) => typeof x === "object" && x.error);
      const done = ids.length - refused.length;
      for (const x of r.results) if (!(typeof x === "object" && x.error)) selected.delete(typeof x === "object" ? x.id : x);
      notice(`${label}: ${done} done` + (refused.length
        ? `, ${refused.length} refused (job ${refused[0].id}: ${refused[0].error})` : ""));
    } catch (e) {
      notice(`${label} failed: ${e.message}`);
    }
    load();
  };

  let stopped = false;
  const load = async () => {
    const q = view.scope === "active" ? "state=PD,H,R" : "limit=-500";
    try {
      const r = await api("GET", `/v1/jobs?user=all&${q}`);
      if (stopped) return;
      jobs = r.jobs;
      draw();
    } catch (e) {
      notice(e.message);
    }
  };
  const scope = h("select", { id: "queue-scope", onchange: (e) => { view.scope = e.target.value; load(); } },
    h("option", { value: "active", selected: view.scope === "active" }, "Active (queued, held, running)"),
    h("option", { value: "recent", selected: view.scope === "recent" }, "Recent 500, every state"));
  const text = h("input", { id: "queue-filter", type: "search", value: view.text,
    placeholder: "id, name, user, state…",
    oninput: (e) => { view.text = e.target.value; draw(); } });
  main.replaceChildren(h("h1", null, "Queue"),
    h("div", { class: "filters" },
      h("label", null, "Jobs", scope), h("label", null, "Filter", text)),
    h("div", { class: "bulk", role: "group", "aria-label": "actions on the selected jobs" },
      selCount, ...bulkButtons),
    count,
    h("div", { class: "table-wrap" },
      h("table", { id: "queue", "aria-label": "jobs" }, h("thead", null, headRow), tbody)),
    foot);
  draw();
  load();
  // More rows as the end of the table comes into view.
  const seen = new IntersectionObserver((es) => { if (es.some((e) => e.isIntersecting)) grow(); },
    { rootMargin: "800px" });
  seen.observe(foot);
  // The clocks of the rows made: elapsed and wait move on without a reload.
  const tick = setInterval(() => {
    const t = now();
    for (const c of tbody.querySelectorAll("td[data-from]")) c.textContent = fmtDuration(t - Number(c.dataset.from));
  }, 5000);
  let pending = null;
  const unsub = subscribe((type) => {
    if (!type.startsWith("job_") && type !== "resync") return;
    clearTimeout(pending);
    pending = setTimeout(load, 150);
  });
  return () => { stopped = true; clearTimeout(pending); clearInterval(tick); seen.disconnect(); unsub(); };
}

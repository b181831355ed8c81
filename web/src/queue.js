// The queue: everyone's jobs (active ones, or the recent ones of every state), filtered
// and sorted in the page, read again on every job event (no reload).
import { api, fmtTime, h, jobState, notice, stateBadge } from "./ui.js";
import { subscribe } from "./events.js";

const COLUMNS = [
  ["id", "ID"], ["slurm_id", "Slurm ID"], ["name", "Name"], ["user", "User"], ["state", "State"],
  ["gpus", "GPUs"],
  ["reason", "Reason"], ["expected_start", "Expected start"], ["submit_time", "Submitted"],
  ["command", "Command"],
];

const view = { scope: "active", text: "", sortKey: "id", desc: false };

function value(j, key) {
  if (key === "state") return jobState(j);
  if (key === "gpus") return j.gpu_ids || j.gpus || 0;
  if (key === "command") return j.command || j.script_path || "";
  return j[key];
}

function cmp(a, b) {
  if (a === b) return 0;
  if (a === null || a === undefined) return 1;
  if (b === null || b === undefined) return -1;
  return typeof a === "number" && typeof b === "number" ? a - b : String(a).localeCompare(String(b));
}

function row(j) {
  return h("tr", { "data-job": j.id },
    h("td", null, h("a", { href: `#/job/${j.id}` }, String(j.id))),
    h("td", { "data-field": "slurm_id" }, j.slurm_id ? String(j.slurm_id) : ""),
    h("td", null, j.name || ""), h("td", null, j.user),
    h("td", null, stateBadge(jobState(j))),
    h("td", null, j.gpu_ids || String(j.gpus || 0)),
    h("td", null, j.reason || ""),
    h("td", null, j.expected_start ? fmtTime(j.expected_start) : ""),
    h("td", null, fmtTime(j.submit_time)),
    h("td", { class: "cmd", title: value(j, "command") }, value(j, "command")));
}

export function queuePage(main) {
  let jobs = [];
  const tbody = h("tbody");
  const count = h("p", { class: "muted", role: "status" });
  const headRow = h("tr");
  const draw = () => {
    const t = view.text.toLowerCase();
    const shown = jobs.filter((j) => !t || [j.id, j.name, j.user, j.command, j.reason, jobState(j)]
      .some((v) => v !== null && v !== undefined && String(v).toLowerCase().includes(t)));
    shown.sort((a, b) => cmp(value(a, view.sortKey), value(b, view.sortKey)) * (view.desc ? -1 : 1));
    tbody.replaceChildren(...shown.map(row));
    count.textContent = `${shown.length} of ${jobs.length} jobs`;
    headRow.replaceChildren(...COLUMNS.map(([key, label]) => h("th", {
      scope: "col",
      "aria-sort": view.sortKey === key ? (view.desc ? "descending" : "ascending") : "none",
    }, h("button", { type: "button", onclick: () => {
      view.desc = view.sortKey === key ? !view.desc : false;
      view.sortKey = key;
      draw();
    } }, label, view.sortKey === key ? (view.desc ? " ▼" : " ▲") : ""))));
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
    count,
    h("table", { id: "queue", "aria-label": "jobs" }, h("thead", null, headRow), tbody));
  draw();
  load();
  let pending = null;
  const unsub = subscribe((type) => {
    if (!type.startsWith("job_") && type !== "resync") return;
    clearTimeout(pending);
    pending = setTimeout(load, 150);
  });
  return () => { stopped = true; clearTimeout(pending); unsub(); };
}

// Small helpers shared by the pages: DOM building (text only: job names and commands are
// other users' strings, so nothing is ever parsed as HTML), the API and the dialogs.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "width%") el.style.width = v + "%";
    else el.setAttribute(k, v === true ? "" : String(v));
  }
}

function append(el, children) {
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// fetch with the header every change needs (the server refuses changes without it).
export async function api(method, path, body) {
  const opts = { method, headers: {}, credentials: "same-origin" };
  if (method !== "GET") opts.headers["X-Gflow-Web"] = "1";
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const r = await fetch(path, opts);
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = { error: text }; }
  if (!r.ok) throw new Error((data && data.error) || `HTTP ${r.status}`);
  return data;
}

export function notice(text) {
  const n = document.getElementById("notice");
  n.textContent = text;
  clearTimeout(notice.timer);
  notice.timer = setTimeout(() => { n.textContent = ""; }, 6000);
}

// A modal question; resolves true for yes. Escape and "No" say no.
export function confirmDialog(question) {
  const d = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = question;
  return new Promise((resolve) => {
    const yes = document.getElementById("confirm-yes");
    const no = document.getElementById("confirm-no");
    const done = (v) => {
      yes.onclick = no.onclick = null;
      d.onclose = null;
      if (d.open) d.close();
      resolve(v);
    };
    yes.onclick = () => done(true);
    no.onclick = () => done(false);
    d.onclose = () => done(false);
    d.showModal();
    no.focus();
  });
}

// One formatter for every cell: toLocaleString with options makes a new one per call,
// which costs more than the rest of a queue row.
let timeFormat = null;
export function fmtTime(t) {
  if (t === null || t === undefined) return "—";
  timeFormat ??= new Intl.DateTimeFormat(undefined, { dateStyle: "short", timeStyle: "medium" });
  return timeFormat.format(new Date(t * 1000));
}

export function fmtDuration(secs) {
  if (secs === null || secs === undefined) return "—";
  secs = Math.round(secs);
  const d = Math.floor(secs / 86400), hh = Math.floor((secs % 86400) / 3600);
  const mm = Math.floor((secs % 3600) / 60), ss = secs % 60;
  const p = (x) => String(x).padStart(2, "0");
  return (d ? d + "-" : "") + p(hh) + ":" + p(mm) + ":" + p(ss);
}

export function stateBadge(state) {
  const names = { PD: "Queued", H: "Held", R: "Running", CG: "Cancelling", CD: "Finished",
    F: "Failed", CA: "Cancelled", TO: "Timeout" };
  return h("span", { class: `badge st-${state}`, title: names[state] || state,
    "data-state": state }, state);
}

// A cell's displayed state: CG for a running job whose cancel was asked.
export function jobState(j) { return j.cancelling ? "CG" : j.state; }

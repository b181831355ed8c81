// gflow's dashboard: a hash router over four pages, one event stream, the theme toggle.
import { connect } from "./events.js";
import { gpusPage } from "./gpus.js";
import { historyPage } from "./history.js";
import { jobPage } from "./job.js";
import { queuePage } from "./queue.js";

let cleanup = null;

function route() {
  const main = document.getElementById("main");
  if (cleanup) cleanup();
  const hash = location.hash || "#/gpus";
  const job = hash.match(/^#\/job\/(\d+)$/);
  const page = job ? "queue" : hash.slice(2);
  for (const a of document.querySelectorAll("header nav a")) {
    if (a.id === `nav-${page}`) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  if (job) cleanup = jobPage(main, job[1]);
  else if (page === "queue") cleanup = queuePage(main);
  else if (page === "history") cleanup = historyPage(main);
  else cleanup = gpusPage(main);
  document.title = `gflow · ${job ? "job " + job[1] : page}`;
}

function theme() {
  const saved = localStorage.getItem("gflow-theme");
  if (saved) document.documentElement.dataset.theme = saved;
  document.getElementById("theme").addEventListener("click", () => {
    const dark = document.documentElement.dataset.theme
      ? document.documentElement.dataset.theme === "dark"
      : matchMedia("(prefers-color-scheme: dark)").matches;
    const next = dark ? "light" : "dark";
    document.documentElement.dataset.theme = next;
    localStorage.setItem("gflow-theme", next);
  });
}

addEventListener("DOMContentLoaded", () => {
  theme();
  connect((hello) => {
    document.getElementById("whoami").textContent =
      `as ${hello.user}${hello.admin ? " (admin)" : ""}`;
  });
  addEventListener("hashchange", route);
  route();
});

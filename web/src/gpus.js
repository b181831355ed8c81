// The GPU board: one card per GPU (memory, utilisation, temperature, what runs on it,
// sparklines of its last ten minutes) and the topology matrix. Redrawn on `gpu` events
// and every 10 s (utilisation moves without events).
import { api, h, notice } from "./ui.js";
import { subscribe } from "./events.js";
import { gpuSparks } from "./spark.js";

function card(g, samples) {
  const memPct = g.memory_total_mib ? (100 * g.memory_used_mib) / g.memory_total_mib : 0;
  const util = g.utilization_gpu ?? null;
  const procs = (g.processes || []).map((p) =>
    h("li", null,
      p.job ? h("a", { href: `#/job/${p.job}` }, `job ${p.job}`) : h("strong", null, "outside process"),
      ` · pid ${p.pid} · ${p.user ?? "?"} · ${p.used_memory_mib ?? "?"} MiB`,
      p.command ? h("div", { class: "muted" }, p.command) : null));
  const jobs = (g.jobs || []).map((id) => h("a", { href: `#/job/${id}` }, `job ${id}`));
  return h("article", { class: "gpu", "aria-label": `GPU ${g.index}`, "data-gpu": g.index },
    h("h2", null, `GPU ${g.index} `, h("span", { class: `badge st-${g.state}` }, g.state)),
    h("div", { class: "muted" }, g.name || ""),
    h("div", null, `Memory ${g.memory_used_mib ?? "?"} / ${g.memory_total_mib ?? "?"} MiB`),
    h("div", { class: "bar", role: "img",
      "aria-label": `memory ${Math.round(memPct)} percent used` },
      h("span", { "width%": memPct.toFixed(1) })),
    h("div", null, `Utilisation ${util === null ? "?" : util + " %"}`),
    h("div", { class: "bar", role: "img", "aria-label": `utilisation ${util ?? 0} percent` },
      h("span", { "width%": util ?? 0 })),
    h("div", null, `Temperature ${g.temperature_c ?? "?"} °C`,
      g.power_w !== null && g.power_w !== undefined ? ` · Power ${g.power_w} W` : ""),
    g.reason ? h("div", { class: "muted" }, g.reason) : null,
    samples ? gpuSparks(samples.gpus.find((x) => x.index === g.index), samples.now,
      samples.window_secs) : null,
    jobs.length ? h("div", null, "Jobs: ", ...jobs.flatMap((a, i) => (i ? [", ", a] : [a]))) : null,
    procs.length ? h("ul", { "aria-label": "processes" }, procs) : null);
}

// Under the slurm backend: one card per node of the partition (GET /v1/gpus' backend,
// read from `scontrol show node` at every poll), its GPUs in use and its state.
function nodeCard(n) {
  const pct = n.gpus ? (100 * n.gpus_used) / n.gpus : 0;
  return h("article", { class: "gpu", "aria-label": `node ${n.name}`, "data-node": n.name },
    h("h2", null, `${n.name} `, h("span", { class: "badge" }, n.state)),
    h("div", { class: "muted" }, n.gres || "no GPUs"),
    h("div", null, `GPUs ${n.gpus_used} / ${n.gpus} in use`),
    h("div", { class: "bar", role: "img", "aria-label": `GPUs ${Math.round(pct)} percent in use` },
      h("span", { "width%": pct.toFixed(1) })),
    h("div", null, `CPUs ${n.cpus_alloc} / ${n.cpus} · ${n.memory_mb} MiB`),
    n.reason ? h("div", { class: "muted" }, n.reason) : null);
}

function slurmHead(b) {
  return [`Slurm partition ${b.partition || "(default)"}`, `${b.nodes.length} nodes`,
    `GPUs ${b.gpus.used} / ${b.gpus.total} in use`,
    b.read_at ? null : "nodes not read yet", b.error].filter(Boolean).join(" · ");
}

function topology(m, gpus) {
  if (!m || !m.length) return null;
  return h("div", { class: "table-wrap" }, h("table", { "aria-label": "GPU topology (nvidia-smi topo -m)" },
    h("thead", null, h("tr", null, h("th", { scope: "col" }, ""),
      gpus.map((g) => h("th", { scope: "col" }, `GPU ${g.index}`)))),
    h("tbody", null, m.map((row, i) => h("tr", null,
      h("th", { scope: "row" }, `GPU ${gpus[i] ? gpus[i].index : i}`),
      row.map((cell) => h("td", null, cell)))))));
}

export function gpusPage(main) {
  const board = h("div", { class: "gpus", id: "gpu-board" });
  const topo = h("div");
  const head = h("p", { class: "muted" });
  main.replaceChildren(h("h1", null, "GPUs"), head, board, h("h2", null, "Topology"), topo);
  let stopped = false;
  const load = async () => {
    try {
      // The samples are an extra: a daemon without them still shows its board.
      const [r, samples] = await Promise.all([api("GET", "/v1/gpus"),
        api("GET", "/v1/gpus/samples").catch(() => null)]);
      if (stopped) return;
      if (samples) {
        const newest = Math.max(0, ...samples.gpus.flatMap((x) => x.samples.map((p) => p.time)));
        samples.now = Math.max(Date.now() / 1000, newest);
      }
      const b = r.backend;
      if (b && b.kind === "slurm") {
        head.textContent = slurmHead(b);
        board.replaceChildren(...b.nodes.map(nodeCard));
        topo.replaceChildren(h("p", { class: "muted" }, "Slurm's nodes: see scontrol show topology"));
        return;
      }
      head.textContent = [r.simulated ? "Simulated GPUs" : null,
        r.driver_version ? `driver ${r.driver_version}` : null,
        `allocation ${r.strategy}`, r.error].filter(Boolean).join(" · ");
      board.replaceChildren(...r.gpus.map((g) => card(g, samples)));
      topo.replaceChildren(topology(r.topology, r.gpus) || h("p", { class: "muted" }, "none"));
    } catch (e) {
      notice(e.message);
    }
  };
  load();
  const timer = setInterval(load, 10000);
  const unsub = subscribe((type) => { if (type === "gpu" || type === "resync") load(); });
  return () => { stopped = true; clearInterval(timer); unsub(); };
}

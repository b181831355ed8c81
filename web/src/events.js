// One event stream for the whole page (GET /v1/events, everyone's jobs): each page
// subscribes to the types it shows and reads its data again when told to resync.
const listeners = new Set();
let source = null;

export function subscribe(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

function emit(type, data) {
  for (const fn of [...listeners]) fn(type, data);
}

export function connect(onHello) {
  const live = document.getElementById("live");
  source = new EventSource("/v1/events?user=all");
  source.addEventListener("open", () => { live.textContent = "● live"; });
  source.addEventListener("error", () => { live.textContent = "○ reconnecting…"; });
  source.addEventListener("hello", (e) => onHello(JSON.parse(e.data)));
  for (const type of ["job_submitted", "job_started", "job_ended", "job_updated", "gpu",
    "daemon", "resync"]) {
    source.addEventListener(type, (e) => emit(type, e.data ? JSON.parse(e.data) : null));
  }
}

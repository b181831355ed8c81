"""Dashboard v2 (issue 30): GET /v1/gpus/samples and the GPU cards' sparklines, a `gpu`
event on every change of a GPU's holder, arrays in one row, the elapsed and wait columns,
bulk cancel/hold/release, the job page's GPU use, energy and triage, the history chart's
time axis, the favicon and a clean console, a 500 px window without sideways scrolling,
no libmicrohttpd error lines for closed tabs, and 10,000 queued jobs drawn (and sorted)
in under 300 ms in headless Chromium.

The browser is test_web.py's (chromedriver's W3C WebDriver over plain HTTP), here with
Chromium's console log kept (goog:loggingPrefs) so that a test can read it.
"""
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

from conftest import wait_for
from test_events import Stream
from test_web import Browser, Web, free_port

POLL = {"GFLOW_DAEMON__GPU_POLL_INTERVAL_SECS": "1"}  # a sample a second


class ConsoleBrowser(Browser):
    """test_web's Browser, with the console log kept and a window size of our choosing."""

    def __init__(self, profile, width=1280, height=1000):
        self.port = free_port()
        self.driver = subprocess.Popen([shutil.which("chromedriver"), f"--port={self.port}"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{self.port}"
        wait_for(self._ready, "chromedriver to answer", timeout=15, interval=0.1)
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:loggingPrefs": {"browser": "ALL"},
            "goog:chromeOptions": {
                "binary": shutil.which("chromium"),
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", f"--window-size={width},{height}",
                         f"--user-data-dir={profile}", "--no-first-run"]}}}}
        self.session = self._call("POST", "/session", caps)["sessionId"]

    def console(self):
        """Chromium's console entries since the last call: [{"level", "message"}]."""
        return self.cmd("POST", "/se/log", {"type": "browser"})

    def errors(self):
        return [e for e in self.console() if e["level"] in ("SEVERE", "WARNING")]

    def resize(self, width, height=900):
        self.cmd("POST", "/window/rect", {"width": width, "height": height})
        wait_for(lambda: self.js("return window.innerWidth") == width,
                 f"the window to be {width} px wide", timeout=5)


@pytest.fixture
def cbrowser():
    if not shutil.which("chromium") or not shutil.which("chromedriver"):
        pytest.skip("needs Debian's chromium and chromium-driver (scripts/install-deps.sh)")
    profile = tempfile.mkdtemp(prefix="gf-chromium-")
    b = ConsoleBrowser(profile)
    yield b
    b.quit()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def web4p(make_gflow):
    """4 simulated GPUs polled every second, and its dashboard."""
    g = make_gflow(env=POLL, args=("--simulate-gpus", "4"))
    w = Web(g)
    yield g, w
    w.stop()


def open_dashboard(b, w, page="#/gpus"):
    b.go(w.url)
    b.wait_css("article.gpu", "the board")
    wait_for(lambda: "live" in b.js("return document.getElementById('live').textContent"),
             "the event stream to connect", timeout=10)
    if page != "#/gpus":
        b.js(f"location.hash = '{page}'")


# ---------------------------------------------------------------- the samples API

def test_gpu_samples_are_the_polls_of_the_last_ten_minutes(make_gflow):
    g = make_gflow(env=POLL, args=("--simulate-gpus", "2"))

    def enough():
        r = g.api("GET", "/v1/gpus/samples")
        assert r.status == 200, r
        o = r.json()
        return o if o["gpus"] and all(len(x["samples"]) >= 3 for x in o["gpus"]) else None

    o = wait_for(enough, "3 samples of each GPU", timeout=15, interval=0.2)
    assert o["window_secs"] == 600 and o["interval_secs"] == 1
    assert [x["index"] for x in o["gpus"]] == [0, 1]
    gpus = {x["index"]: x for x in g.api("GET", "/v1/gpus").json()["gpus"]}
    now = time.time()
    for x in o["gpus"]:
        assert x["memory_total_mib"] == gpus[x["index"]]["memory_total_mib"] > 0
        times = [p["time"] for p in x["samples"]]
        assert times == sorted(times) and now - 600 <= times[0] and times[-1] <= now + 1
        # One sample per poll: about a second apart, never two for one read.
        assert all(b - a >= 0.4 for a, b in zip(times, times[1:])), times
        for p in x["samples"]:
            assert set(p) == {"time", "utilization_gpu", "memory_used_mib", "power_w"}
            assert 0 <= p["utilization_gpu"] <= 100 and p["memory_used_mib"] >= 0
            assert p["power_w"] is None or p["power_w"] >= 0


# ---------------------------------------------------------------- GPU holder events

def test_a_gpu_going_straight_to_the_next_job_sends_a_gpu_event(make_gflow):
    g = make_gflow(args=("--simulate-gpus", "1"))
    a = g.submit("--gpus", "1", "sleep", "300")
    g.wait_state(a, "R")
    b = g.submit("--gpus", "1", "sleep", "300")
    assert g.job(b)["state"] == "PD"
    s = Stream(g, "/v1/events?types=gpu")
    s.hello()
    # a ends and b starts on the same GPU, which never shows free in between.
    assert g.run("gcancel", a).returncode == 0
    g.wait_state(b, "R", timeout=20)
    got = s.until(lambda e: e["data"]["jobs"] == [b], "a gpu event naming the new holder")
    last = got[-1]["data"]
    assert last["index"] == 0 and last["busy"] is True, got
    s.close()


# ---------------------------------------------------------------- closed tabs

def test_closed_tabs_print_no_libmicrohttpd_errors(web4p, cbrowser):
    g, w = web4p
    w.login()
    # Event streams and kept-alive connections closed by the client: with a reset, as a
    # killed tab, and with a plain close.
    for linger in (True, False):
        for path in ("/v1/events", "/v1/gpus"):
            c = socket.create_connection(("127.0.0.1", w.port))
            c.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{w.port}\r\n"
                      f"Cookie: {w.cookie}\r\n\r\n".encode())
            c.settimeout(5)
            assert c.recv(65536).startswith(b"HTTP/1.1 200")
            if linger:
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
            c.close()
    # A tab of the dashboard closed (its page gone with its stream).
    b = cbrowser
    open_dashboard(b, w)
    b.go("about:blank")
    # Events for the closed streams to fail on: the web server writes, and finds them gone.
    job = g.submit("--gpus", "1", "true")
    g.wait_state(job)
    wait_for(lambda: len(w.request("GET", "/v1/gpus/samples")[2]) > 0, "the server to answer")
    time.sleep(1)  # the proxy threads' writes of those events (nothing to poll for)
    w.proc.terminate()
    w.proc.wait(timeout=10)
    err = w.proc.stderr.read()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines == ["gflowd: web: stopped"], err
    assert " http: " not in g.daemon_log()


# ---------------------------------------------------------------- in the browser

def test_gpu_cards_draw_sparklines_and_the_console_stays_clean(web4p, cbrowser):
    g, w = web4p
    b = cbrowser
    job = g.submit("--gpus", "2", "sleep", "300")
    g.wait_state(job, "R")
    w.login()
    status, headers, body = w.request("GET", "/favicon.svg")
    assert status == 200 and headers["Content-Type"] == "image/svg+xml" and b"<svg" in body
    open_dashboard(b, w)
    assert b.js("return document.querySelector('link[rel=icon]').getAttribute('href')") == \
        "/favicon.svg"

    def drawn():
        n = b.js("""return [...document.querySelectorAll('article.gpu')].map(c =>
            Number((c.querySelector('.sparks') || {dataset: {}}).dataset.samples || 0))""")
        return len(n) == 4 and min(n) >= 3

    # The board reads the samples every 10 s and on gpu events: a job's start is one.
    g.submit("--gpus", "1", "sleep", "300")
    wait_for(drawn, "sparklines of 3 samples on each card", timeout=30, interval=0.2)
    sparks = b.js("""return [...document.querySelectorAll('article.gpu[data-gpu="0"] .spark')]
        .map(s => ({cls: s.className, lines: s.querySelectorAll('.spark-line').length,
                    label: s.querySelector('svg').getAttribute('aria-label'),
                    value: s.querySelector('.spark-value').textContent}))""")
    assert [s["cls"].split()[1] for s in sparks] == ["spark-util", "spark-mem", "spark-power"]
    for s in sparks:
        assert s["lines"] >= 1 and "last 10 minutes" in s["label"], s
    assert sparks[0]["value"].endswith(" %") and sparks[1]["value"].endswith(" MiB")
    b.screenshot("v2-gpus-sparklines")
    assert b.errors() == []


def test_queue_arrays_columns_and_bulk_actions(web4p, cbrowser):
    g, w = web4p
    b = cbrowser
    arr = g.submit("--gpus", "1", "--array", "1-6", "--name", "sweep", "sleep", "300")
    wait_for(lambda: sum(j["state"] == "R" for j in g.jobs(state="R")) == 4, "4 tasks running")
    bulk = [g.submit("--name", f"bulk{i}", "--gpus", "1", "sleep", "300") for i in range(3)]
    open_dashboard(b, w, "#/queue")
    # The array is one row, with its tasks counted by state.
    row = f'tr[data-group="{arr}"]'
    b.wait_css(row, "the array's row")
    counts = b.js(f"return document.querySelector('{row} td.counts').dataset.counts")
    assert counts == "R:4 PD:2", counts
    assert b.js("return document.querySelectorAll('tr.task').length") == 0
    b.click(b.find_all(f"{row} button.expand")[0])
    tasks = b.wait_css("tr.task", "the array's tasks", count=6)
    assert len(tasks) == 6
    assert b.js(f"return document.querySelector('{row} button.expand')"
                ".getAttribute('aria-expanded')") == "true"
    # Elapsed for running jobs, wait for queued ones, and the clock moves them on.
    running = g.jobs(state="R")[0]["id"]
    queued = bulk[0]
    cell = "return document.querySelector('tr[data-job=\"%s\"] td[data-field=\"%s\"]').textContent"
    assert b.js(cell % (running, "elapsed")).count(":") == 2
    assert b.js(cell % (queued, "elapsed")) == ""
    w0 = b.js(cell % (queued, "wait"))
    assert w0.count(":") == 2
    wait_for(lambda: b.js(cell % (queued, "wait")) != w0, "the wait to move on", timeout=12,
             interval=0.5)
    b.screenshot("v2-queue-array")
    # An array's box takes its tasks; a task's box makes the array's dashed.
    sel = "return document.getElementById('queue-selected').textContent"
    b.click(b.find_all(f"{row} input[data-group]")[0])
    assert b.js(sel) == "6 selected"
    assert b.js("return [...document.querySelectorAll('tr.task input')].every(c => c.checked)")
    b.click(b.find_all("tr.task input")[0])
    assert b.js(sel) == "5 selected"
    assert b.js(f"return document.querySelector('{row} input').indeterminate") is True
    b.click(b.find_all(f"{row} input[data-group]")[0])  # dashed: checks all again
    assert b.js(sel) == "6 selected"
    b.click(b.find_all(f"{row} input[data-group]")[0])
    assert b.js(sel) == "0 selected"

    # Bulk: the filter shows the three jobs, select all shown, hold, release, cancel.
    b.js("const f = document.getElementById('queue-filter'); f.value = 'bulk';"
         "f.dispatchEvent(new Event('input'))")
    wait_for(lambda: b.js("return document.querySelectorAll('#queue tbody tr').length") == 3,
             "the three bulk jobs alone")
    b.click(b.find_all("#queue-select-all")[0])
    assert b.js("return document.getElementById('queue-selected').textContent") == "3 selected"
    for act, label, state in (("hold", "Hold", "H"), ("release", "Release", "PD"),
                              ("cancel", "Cancel", "CA")):
        if act != "hold":  # the selection stays on jobs it could not act on, else goes
            b.click(b.find_all("#queue-select-all")[0])
            wait_for(lambda: b.js("return document.getElementById('queue-selected')"
                                  ".textContent") == "3 selected", "the 3 selected again")
        b.click(b.find_all(f"#bulk-{act}")[0])
        wait_for(lambda: b.js("return document.getElementById('confirm').open"),
                 "the confirm dialog", timeout=5)
        q = b.js("return document.getElementById('confirm-text').textContent")
        assert q == f"{label} 3 jobs ({', '.join(map(str, bulk))})?", q
        if act == "cancel":  # "No" changes nothing
            b.click(b.find_all("#confirm-no")[0])
            time.sleep(0.3)
            assert all(g.job(j)["state"] == "PD" for j in bulk)
            b.click(b.find_all(f"#bulk-{act}")[0])
            wait_for(lambda: b.js("return document.getElementById('confirm').open"),
                     "the confirm dialog again", timeout=5)
        b.click(b.find_all("#confirm-yes")[0])
        for j in bulk:
            assert g.wait_state(j, state)["state"] == state
        if state != "CA":
            wait_for(lambda: b.js("return [...document.querySelectorAll('#queue tbody "
                                  "[data-state]')].map(e => e.dataset.state).join()")
                     == ",".join([state] * 3), f"the page showing {state}", timeout=10)
    # Cancelled jobs leave the active view, and the selection.
    wait_for(lambda: b.js("return document.querySelectorAll('#queue tbody tr').length") == 0,
             "the cancelled jobs gone from the active view", timeout=10)
    assert b.js("return document.getElementById('queue-selected').textContent") == "0 selected"
    assert b.js("return document.getElementById('bulk-cancel').disabled") is True
    assert b.errors() == []


def test_job_page_shows_gpu_use_energy_and_triage(web4p, cbrowser):
    g, w = web4p
    b = cbrowser
    plain = g.submit("--name", "plain", "true")
    oom = g.submit("--name", "oom", "sh", "-c", "echo 'CUDA out of memory'; exit 1")
    g.wait_state(plain)
    g.wait_state(oom)
    open_dashboard(b, w, f"#/job/{plain}")
    b.wait_css('dd[data-field="state"]', "the job page")
    real = g.job(plain)
    shown = b.js("return [...document.querySelectorAll('dd[data-field]')].map(e => e.dataset.field)")
    for key, field in (("gpu_util_mean", "gpu_util"), ("gpu_mem_peak_mb", "gpu_mem_peak"),
                       ("energy_wh", "energy"), ("failure_class", "failure_class")):
        # Fields that are unknown (or absent, on a daemon without them) are not shown.
        assert (field in shown) == (real.get(key) is not None), (field, shown)
    # The figures and the class as the daemon sends them (parts A and B of issue 30):
    # given to the page here through its fetch, so that the page is tested on its own.
    b.js("""const real = window.fetch;
        window.fetch = async (url, opts) => {
          const r = await real(url, opts);
          if (!/^\\/v1\\/jobs\\/\\d+$/.test(url)) return r;
          const j = await r.json();
          Object.assign(j, {gpu_util_mean: 78, gpu_util_peak: 99, gpu_mem_peak_mb: 62669,
            energy_wh: 412.3, gpu_idle: false, failure_class: 'CudaOOM',
            failure_line: 'torch.cuda.OutOfMemoryError: CUDA out of memory.'});
          return new Response(JSON.stringify(j), {status: 200,
            headers: {'Content-Type': 'application/json'}});
        };""")
    b.js(f"location.hash = '#/job/{oom}'")
    b.wait_css('dd[data-field="energy"]', "the job's energy")
    field = "return document.querySelector('dd[data-field=\"%s\"]').textContent"
    assert b.js(field % "gpu_util") == "78 % mean, 99 % peak"
    assert b.js(field % "gpu_mem_peak") == "61.2 GiB"
    assert b.js(field % "energy") == "412.3 Wh"
    assert b.js(field % "failure_class") == "CudaOOM"
    assert b.js(field % "failure_line") == "torch.cuda.OutOfMemoryError: CUDA out of memory."
    assert b.js("return document.querySelector('dd[data-field=\"gpu_idle\"]')") is None
    triage = b.js("return document.getElementById('job-triage').textContent")
    assert triage == "CudaOOMtorch.cuda.OutOfMemoryError: CUDA out of memory."
    b.screenshot("v2-job-triage")
    assert b.errors() == []


def test_history_chart_has_a_time_axis(web4p, cbrowser):
    g, w = web4p
    b = cbrowser
    job = g.submit("--gpus", "1", "true")
    g.wait_state(job)
    wait_for(lambda: any(x["series"] for x in g.api("GET", "/v1/stats?gpu=1&buckets=48")
                         .json()["gpus"]), "utilisation samples", timeout=15, interval=0.2)
    open_dashboard(b, w, "#/history")
    ticks = b.wait_css("#history svg .time-axis text", "the time axis's labels", count=2)
    labels = b.js("return [...document.querySelectorAll('#history svg .time-axis text')]"
                  ".map(t => [Number(t.dataset.time), Number(t.getAttribute('x')), t.textContent])")
    assert len(labels) == len(ticks) >= 2
    times = [t for t, _, _ in labels]
    xs = [x for _, x, _ in labels]
    assert times == sorted(times) and xs == sorted(xs) and len(set(xs)) == len(xs)
    assert all(text.strip() for _, _, text in labels)
    # The 7-day default: one tick a day or two, labelled with dates.
    assert 1 * 86400 <= times[1] - times[0] <= 2 * 86400, labels
    b.js("const p = document.getElementById('history-period'); p.value = '1';"
         "p.dispatchEvent(new Event('change'))")
    wait_for(lambda: (lambda t: len(t) >= 2 and t[1] - t[0] <= 6 * 3600)(
        b.js("return [...document.querySelectorAll('#history svg .time-axis text')]"
             ".map(t => Number(t.dataset.time))")), "hour ticks for the last day", timeout=10)
    b.screenshot("v2-history-axis")
    assert b.errors() == []


def test_every_page_fits_a_500px_window(web4p, cbrowser):
    g, w = web4p
    b = cbrowser
    job = g.submit("--gpus", "1", "--name", "a-rather-long-job-name-for-a-narrow-window",
                   "sh", "-c", "sleep 300 || echo " + "x" * 200)
    g.submit("--gpus", "1", "--array", "1-3", "true")
    g.wait_state(job, "R")
    b.resize(500)
    open_dashboard(b, w)
    for page, ready in (("#/gpus", "article.gpu .sparks"), ("#/queue", f'tr[data-job="{job}"]'),
                        (f"#/job/{job}", 'dd[data-field="state"]'), ("#/history", "#history h2")):
        b.js(f"location.hash = '{page}'")
        b.wait_css(ready, f"the page {page}")
        time.sleep(0.2)  # its images and tables laid out
        width = b.js("return document.documentElement.scrollWidth")
        assert width <= 500, (page, width)
        b.screenshot("v2-narrow-" + page.strip("#/").replace("/", "-"))
    assert b.errors() == []


def test_ten_thousand_queued_jobs_render_in_under_300ms(web4p, cbrowser):
    g, w = web4p
    b = cbrowser
    blocker = g.submit("--gpus", "4", "sleep", "600")
    g.wait_state(blocker, "R")
    # The fastest real path: one POST /v1/jobs of 10,000 separate jobs (no array).
    t0 = time.monotonic()
    specs = [{"command": f"echo {i}", "name": f"j{i:05d}", "gpus": 1, "workdir": str(g.work)}
             for i in range(10000)]
    r = g.api("POST", "/v1/jobs", {"jobs": specs}, timeout=120)
    assert r.status == 201, r
    submit_s = time.monotonic() - t0
    open_dashboard(b, w, "#/queue")
    wait_for(lambda: b.js("return document.querySelector('#main p[role=status]').textContent")
             == "10001 of 10001 jobs", "10,001 jobs in the queue", timeout=60, interval=0.2)
    # The queue's draw (filter, sort, rows, layout), as the filter box runs it.
    draw = """const f = document.getElementById('queue-filter');
        const t = performance.now();
        f.value = ''; f.dispatchEvent(new Event('input'));
        document.body.getBoundingClientRect(); document.body.offsetHeight;
        return performance.now() - t;"""
    renders = [b.js(draw) for _ in range(3)]
    # A sort of the 10,000 rows, by name (strings: the slowest) both ways, then by id.
    sort = """const t = performance.now();
        document.querySelector('th button[data-sort="%s"]').click();
        document.body.offsetHeight;
        return performance.now() - t;"""
    sorts = [b.js(sort % key) for key in ("name", "name", "submit_time", "id")]
    first = b.js("return document.querySelector('#queue tbody tr').dataset.job")
    assert first == str(blocker)  # by id, ascending again
    print(f"\n10,000 jobs submitted in {submit_s:.2f} s; queue render best of 3: "
          f"{min(renders):.1f} ms ({', '.join(f'{x:.1f}' for x in renders)}); "
          f"sorts: {', '.join(f'{x:.1f}' for x in sorts)} ms")
    assert min(renders) < 300, renders
    assert min(sorts) < 300 and max(sorts) < 1000, sorts
    # Rows beyond the first chunk come as the table is scrolled.
    n0 = b.js("return document.querySelectorAll('#queue tbody tr').length")
    b.js("document.getElementById('queue-more').scrollIntoView()")
    wait_for(lambda: b.js("return document.querySelectorAll('#queue tbody tr').length") > n0,
             "more rows on scrolling", timeout=5)
    b.screenshot("v2-queue-10k")
    assert b.errors() == []

"""gflowd web, the dashboard (docs/usage.md "Web dashboard", docs/security.md).

HTTP-level tests check the access model with http.client: the token in the URL becomes an
HttpOnly, SameSite=Strict cookie; every other request needs it; Host must name this
server (DNS rebinding); a change needs this server's Origin (or Referer) and the header
X-Gflow-Web: 1; the daemon sees the identity of the user who runs gflowd web.

The browser test drives Debian's chromium through chromedriver's W3C WebDriver protocol
(plain HTTP from urllib) against a daemon on 4 simulated GPUs: the board, a job appearing
in the queue without a reload, its cancel from the job page's confirm dialog, the history
page. Screenshots of each page go to $GFLOW_BUILD_DIR/web-screenshots/.
"""
import base64
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import pytest

from conftest import (BUILD_DIR, SANITIZER_MARKS, TEST_USER, as_user, binary, ensure_test_user,
                      wait_for)

URL_RE = re.compile(r"^http://127\.0\.0\.1:(\d+)/\?token=([0-9a-f]{64})$", re.M)
SCREENSHOTS = BUILD_DIR / "web-screenshots"


class Web:
    """A running `gflowd web` of a sandbox: its port, token and process."""

    def __init__(self, g, user=None):
        argv = [binary("gflowd"), "web", "--port", "0"]
        self.proc = subprocess.Popen(list(user or []) + argv, env=g.env, cwd=str(g.work),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        out = ""
        deadline = time.monotonic() + 10
        while not URL_RE.search(out):
            line = self.proc.stdout.readline()
            if not line or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"gflowd web printed no URL: {out!r} {self.proc.stderr.read()}")
            out += line
        m = URL_RE.search(out)
        self.url, self.port, self.token = m.group(0), int(m.group(1)), m.group(2)
        self.base = f"http://127.0.0.1:{self.port}"
        self.cookie = None

    def stop(self):
        """SIGTERM; fails on a sanitizer report (the ASan build's run of these tests)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        err = self.proc.stderr.read()
        for f in (self.proc.stdout, self.proc.stderr):
            f.close()
        for bad in SANITIZER_MARKS:
            assert bad not in err, err[-4000:]

    def request(self, method, path, body=None, headers=None, host=None, cookie=True):
        """One request; Host defaults to 127.0.0.1:PORT, the cookie to the session's."""
        hdrs = {"Host": host or f"127.0.0.1:{self.port}"}
        if cookie and self.cookie:
            hdrs["Cookie"] = self.cookie
        if body is not None:
            body = json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        hdrs.update(headers or {})
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request(method, path, body=body, headers=hdrs)
            r = conn.getresponse()
            return r.status, r.headers, r.read()
        finally:
            conn.close()

    def login(self):
        status, headers, _ = self.request("GET", f"/?token={self.token}", cookie=False)
        assert status == 303 and headers["Location"] == "/", (status, headers)
        self.cookie = headers["Set-Cookie"].split(";")[0]
        return headers["Set-Cookie"]

    def change(self, path, body=None, **extra):
        """A POST as the page sends it: this server's Origin and the CSRF header."""
        headers = {"Origin": self.base, "X-Gflow-Web": "1"}
        headers.update(extra)
        return self.request("POST", path, body=body, headers={k: v for k, v in headers.items()
                                                               if v is not None})


@pytest.fixture
def web4(make_gflow):
    g = make_gflow(args=("--simulate-gpus", "4"))
    w = Web(g)
    yield g, w
    w.stop()


def error_of(body):
    return json.loads(body)["error"]


# ---------------------------------------------------------------- the access model

def test_token_sets_a_strict_httponly_cookie_and_nothing_works_without_it(web4):
    g, w = web4
    for path in ("/", "/app.js", "/v1/gpus", "/v1/events"):
        status, _, body = w.request("GET", path)
        assert status == 401, (path, status, body)
        assert "token" in error_of(body)
    status, _, body = w.request("GET", "/?token=" + "0" * 64)
    assert status == 403 and "wrong token" in error_of(body)
    status, _, _ = w.request("GET", "/?token=" + w.token[:-1])
    assert status == 403
    cookie = w.login()
    attrs = [a.strip() for a in cookie.split(";")]
    assert attrs[0].startswith(f"gflow_web_{w.port}=")
    assert attrs[0].split("=", 1)[1] != w.token  # the session is not the URL's token
    assert "HttpOnly" in attrs and "SameSite=Strict" in attrs and "Path=/" in attrs
    status, headers, body = w.request("GET", "/")
    assert status == 200 and b'<script src="/app.js"' in body
    csp = headers["Content-Security-Policy"]
    assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "no-referrer"
    status, headers, _ = w.request("GET", "/app.js")
    assert status == 200 and headers["Content-Type"].startswith("text/javascript")
    status, _, body = w.request("GET", "/v1/gpus")
    assert status == 200 and len(json.loads(body)["gpus"]) == 4
    # A forged cookie of the right shape is no session.
    status, _, _ = w.request("GET", "/v1/gpus", headers={"Cookie": f"gflow_web_{w.port}={'a' * 64}"})
    assert status == 401


def test_wrong_host_is_refused_even_with_the_session(web4):
    g, w = web4
    w.login()
    for host in ("evil.example:%d" % w.port, "127.0.0.1", "127.0.0.1:1", "localhost"):
        status, _, body = w.request("GET", "/v1/gpus", host=host)
        assert status == 403 and "Host" in error_of(body), (host, status)
        status, _, _ = w.request("GET", f"/?token={w.token}", host=host, cookie=False)
        assert status == 403, host
    assert w.request("GET", "/v1/gpus", host=f"localhost:{w.port}")[0] == 200


def test_changes_need_this_origin_and_the_csrf_header(web4):
    g, w = web4
    w.login()
    job = g.submit("sleep", "300")
    g.wait_state(job, "R")
    path = f"/v1/jobs/{job}/cancel"
    refused = [
        {"Origin": "http://evil.example"},
        {"Origin": f"http://127.0.0.1:{w.port + 1}"},
        {"Origin": None},  # neither Origin nor Referer
        {"Origin": None, "Referer": "http://evil.example/"},
        {"Origin": None, "Referer": f"http://127.0.0.1:{w.port}.evil.example/"},
        {"X-Gflow-Web": None},
        {"X-Gflow-Web": "0"},
    ]
    for extra in refused:
        status, _, body = w.change(path, **extra)
        assert status == 403, (extra, status, body)
    status, _, _ = w.request("POST", path, cookie=False,
                             headers={"Origin": w.base, "X-Gflow-Web": "1"})
    assert status == 401
    assert g.job(job)["state"] == "R"
    # The Referer stands in for a missing Origin.
    status, _, body = w.change(path + "?dry_run=1", Origin=None, Referer=f"{w.base}/#/job/{job}")
    assert status == 200, body
    status, _, body = w.change(path)
    assert status == 200, body
    assert g.wait_state(job, "CA")["state"] == "CA"


def test_requests_carry_the_identity_of_who_runs_it(make_gflow):
    if os.geteuid() != 0:
        pytest.skip("needs root: a job of root and a gflowd web of another user")
    uid, gid, _ = ensure_test_user()
    g = make_gflow(args=("--simulate-gpus", "4"))
    os.chmod(g.root, 0o755)  # the test user reaches the root daemon's socket
    root_web = Web(g)
    user_web = Web(g, user=as_user(uid, gid))
    try:
        root_web.login()
        status, _, body = root_web.change("/v1/jobs", {"command": "sleep 300",
                                                       "workdir": str(g.work)})
        assert status == 201, body
        job = json.loads(body)["jobs"][0]["id"]
        assert g.wait_state(job, "R")["user"] == "root"
        user_web.login()
        status, _, body = user_web.change(f"/v1/jobs/{job}/cancel")
        assert status == 403, body
        assert g.job(job)["state"] == "R"
        # The event stream's hello names the user the daemon sees.
        conn = http.client.HTTPConnection("127.0.0.1", user_web.port, timeout=10)
        conn.request("GET", "/v1/events", headers={"Host": f"127.0.0.1:{user_web.port}",
                                                   "Cookie": user_web.cookie})
        r = conn.getresponse()
        assert r.status == 200 and r.headers["Content-Type"].startswith("text/event-stream")
        hello = b""
        while b"\n\n" not in hello:
            hello += r.read1(4096)
        conn.close()
        data = json.loads(re.search(rb"^data: (.*)$", hello, re.M).group(1))
        assert data["user"] == TEST_USER and data["admin"] is False
        # Root's own session may cancel it (and the job, submitted without the sandbox's
        # marker in its environment, must end before the teardown).
        assert root_web.change(f"/v1/jobs/{job}/cancel")[0] == 200
        g.wait_state(job, "CA")
    finally:
        root_web.stop()
        user_web.stop()


def test_a_stopped_daemon_is_a_502_and_the_dashboard_keeps_serving(web4):
    g, w = web4
    w.login()
    assert g.down().returncode == 0
    status, _, body = w.request("GET", "/v1/gpus")
    assert status == 502 and error_of(body).startswith(
        f"gflowd is not running: start it with 'gflowd up' (socket {g.sock}: "), body
    assert w.request("GET", "/")[0] == 200
    g.up("--simulate-gpus", "4")
    status, _, body = w.request("GET", "/v1/gpus")
    assert status == 200 and len(json.loads(body)["gpus"]) == 4


def test_bad_options_are_one_line_errors(make_gflow):
    g = make_gflow(start=False)
    cp = g.gflowd("web", "--bind", "0.0.0.0")
    assert cp.returncode == 2 and cp.stderr.count("\n") == 1, cp.stderr
    assert "127.0.0.1 only" in cp.stderr
    cp = g.gflowd("web", "--port", "70000")
    assert cp.returncode == 2 and "--port" in cp.stderr
    cp = g.gflowd("--port", "8080", "status")
    assert cp.returncode == 2 and "only for 'gflowd web'" in cp.stderr


# ---------------------------------------------------------------- in a real browser

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Browser:
    """Headless chromium through chromedriver's W3C WebDriver protocol."""

    def __init__(self, profile):
        self.port = free_port()
        self.driver = subprocess.Popen([shutil.which("chromedriver"), f"--port={self.port}"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{self.port}"
        wait_for(self._ready, "chromedriver to answer", timeout=15, interval=0.1)
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": shutil.which("chromium"),
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1280,1000",
                         f"--user-data-dir={profile}", "--no-first-run"]}}}}
        self.session = self._call("POST", "/session", caps)["sessionId"]

    def _ready(self):
        try:
            with urllib.request.urlopen(self.base + "/status", timeout=2) as r:
                return json.load(r)["value"]["ready"]
        except (OSError, ValueError):
            return False

    def _call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return json.load(r)["value"]
        except urllib.error.HTTPError as e:
            raise AssertionError(f"WebDriver {method} {path}: {e.read()[:500]!r}") from None

    def cmd(self, method, path, body=None):
        return self._call(method, f"/session/{self.session}{path}", body)

    def go(self, url):
        self.cmd("POST", "/url", {"url": url})

    def js(self, script, *args):
        return self.cmd("POST", "/execute/sync", {"script": script, "args": list(args)})

    def js_async(self, script, *args):
        return self.cmd("POST", "/execute/async", {"script": script, "args": list(args)})

    def find_all(self, css):
        return self.cmd("POST", "/elements", {"using": "css selector", "value": css})

    def wait_css(self, css, what, count=1, timeout=10):
        return wait_for(lambda: (lambda f: f if len(f) >= count else None)(self.find_all(css)),
                        what, timeout=timeout, interval=0.05)

    def click(self, element):
        eid = next(iter(element.values()))
        self.cmd("POST", f"/element/{eid}/click", {})

    def screenshot(self, name):
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        png = base64.b64decode(self.cmd("GET", "/screenshot"))
        (SCREENSHOTS / f"{name}.png").write_bytes(png)

    def quit(self):
        try:
            self.cmd("DELETE", "")
        finally:
            self.driver.terminate()
            self.driver.wait(timeout=10)


@pytest.fixture
def browser():
    if not shutil.which("chromium") or not shutil.which("chromedriver"):
        pytest.skip("needs Debian's chromium and chromium-driver (scripts/install-deps.sh)")
    profile = tempfile.mkdtemp(prefix="gf-chromium-")
    b = Browser(profile)
    yield b
    b.quit()
    shutil.rmtree(profile, ignore_errors=True)


def test_dashboard_in_a_browser(web4, browser):
    g, w = web4
    b = browser
    b.go(w.url)
    cards = b.wait_css("article.gpu", "the board's 4 GPU cards", count=4)
    assert len(cards) == 4
    assert b.js("return location.href") == w.base + "/"  # the token left the address bar
    assert b.js("return document.cookie") == ""  # HttpOnly: no script reads the session
    b.wait_css("#live", "the event stream")
    wait_for(lambda: "live" in b.js("return document.getElementById('live').textContent"),
             "the event stream to connect", timeout=10)
    b.screenshot("gpus")

    b.js("location.hash = '#/queue'; window.e2eNoReload = true")
    b.wait_css("table#queue", "the queue page")
    job = g.submit("--name", "webjob", "--gpus", "1", "sleep", "300")
    b.wait_css(f'tr[data-job="{job}"]', "the submitted job in the queue without a reload")
    assert b.js("return window.e2eNoReload") is True
    b.wait_css(f'tr[data-job="{job}"] [data-state="R"]', "the job shown running")
    b.screenshot("queue")
    # Screen readers: every control has a name (its text, a label around it, aria-label).
    unnamed = b.js("""return [...document.querySelectorAll('a, button, input, select')]
        .filter(e => !(e.textContent.trim() || e.closest('label') || e.getAttribute('aria-label')))
        .map(e => e.outerHTML)""")
    assert unnamed == [], unnamed

    # The board shows the job on the GPU it got.
    gpu = int(g.wait_state(job, "R")["gpu_ids"])
    b.js("location.hash = '#/gpus'")
    b.wait_css(f'article.gpu[data-gpu="{gpu}"] a[href="#/job/{job}"]', "the job on its GPU's card")
    b.screenshot("gpus-busy")
    b.js("location.hash = '#/queue'")

    # A change without the CSRF header is refused, even from the page's own origin.
    status = b.js_async("const done = arguments[arguments.length - 1];"
                        f"fetch('/v1/jobs/{job}/cancel', {{method: 'POST'}})"
                        ".then(r => done(r.status))")
    assert status == 403

    after = g.submit("--name", "after", "--depends-on", job, "true")
    b.wait_css(f'tr[data-job="{after}"]', "the dependent job in the queue")
    b.click(b.wait_css(f'tr[data-job="{job}"] a', "the job's link")[0])
    g.wait_state(job, "R")
    cancel = b.wait_css("#job-cancel", "the job page's Cancel button")[0]
    b.wait_css(f'svg a[href="#/job/{after}"]', "the dependent in the dependency graph")
    b.screenshot("job")
    b.click(cancel)
    wait_for(lambda: b.js("return document.getElementById('confirm').open"),
             "the confirm dialog", timeout=5)
    question = b.js("return document.getElementById('confirm-text').textContent")
    assert f"Cancel job {job} (webjob)?" in question and f"depend on it: {after}" in question
    b.screenshot("job-confirm")
    b.click(b.find_all("#confirm-yes")[0])
    b.wait_css('dd[data-field="state"] [data-state="CA"]', "the job shown Cancelled",
               timeout=15)
    assert g.job(job)["state"] == "CA"
    assert g.wait_state(after, "CA")["reason"] == f"DependencyFailed:{job}"
    b.screenshot("job-cancelled")

    b.js("location.hash = '#/history'")
    b.wait_css("#history h2", "the history page")
    rows = b.js("return [...document.querySelectorAll('#history tbody th')].map(e => e.textContent)")
    assert "root" in rows, rows  # the job cancelled above
    b.screenshot("history")
    b.click(b.find_all("#theme")[0])  # the other theme than the system's
    wait_for(lambda: b.js("return document.documentElement.dataset.theme"), "the theme switch")
    b.screenshot("history-" + b.js("return document.documentElement.dataset.theme"))
    assert b.js("return window.e2eNoReload") is True

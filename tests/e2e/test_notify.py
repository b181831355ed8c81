"""Notifications (docs/usage.md "Notifications"): the admin's webhooks and gbatch
--notify-email, delivered through the daemon's outbox by gflow-notify.

A receiver (http.server on 127.0.0.1 in a thread) records what it is sent and can fail
on purpose (500 for the first N requests, always, or hang without answering); a fake
sendmail on the daemon's PATH records its argv, uid and message."""
import hashlib
import hmac
import json
import os
import sqlite3
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import TEST_USER, as_user, ensure_test_user, wait_for

SECRET = "s3cret-key"


class Receiver:
    """An HTTP receiver on 127.0.0.1. status: what it answers (fail_first requests get
    500 first); hang: accept and never answer. stop() and start() keep the port."""

    def __init__(self, fail_first=0, status=200, hang=False):
        self.fail_first = fail_first
        self.status = status
        self.hang = hang
        self.requests = []  # (monotonic time, headers dict, body bytes, status answered)
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.port = 0
        self.server = None
        self.start()

    def start(self):
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if outer.hang:
                    outer.release.wait(60)
                    return
                with outer.lock:
                    n = len(outer.requests)
                    code = 500 if n < outer.fail_first else outer.status
                    outer.requests.append((time.monotonic(), dict(self.headers), body, code))
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/hook"

    def got(self):
        with self.lock:
            return list(self.requests)

    def wait(self, n, timeout=20):
        return wait_for(lambda: len(self.got()) >= n and self.got(),
                        f"{n} requests at the receiver", timeout=timeout, interval=0.05)

    def payloads(self):
        return [json.loads(b) for _, _, b, _ in self.got()]


@pytest.fixture
def receivers():
    made = []

    def make(**kw):
        r = Receiver(**kw)
        made.append(r)
        return r
    yield make
    for r in made:
        try:
            r.stop()
        except Exception:
            pass


def toml_list(items):
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def write_config(g, webhooks, extra=""):
    """A gflow.toml with [notifications] (extra lines) and one [[notifications.webhooks]]
    per dict of webhooks."""
    text = "[notifications]\n" + extra
    for w in webhooks:
        text += "[[notifications.webhooks]]\n"
        for k, v in w.items():
            if isinstance(v, list):
                text += f"{k} = {toml_list(v)}\n"
            elif isinstance(v, dict):
                inner = ", ".join(f"{hk} = {json.dumps(hv)}" for hk, hv in v.items())
                text += f"{k} = {{ {inner} }}\n"
            elif isinstance(v, str):
                text += f"{k} = {json.dumps(v)}\n"
            else:
                text += f"{k} = {v}\n"
    conf = g.root / "gflow.toml"
    conf.write_text(text)
    return conf


def start(make_gflow, webhooks, extra="", env=None):
    g = make_gflow(start=False, env=env)
    conf = write_config(g, webhooks, extra)
    g.up("-c", conf)
    g.conf = conf
    return g


def outbox(g):
    """The outbox rows (id, job_id, event, kind, dest, attempts, state, last_error)."""
    db = sqlite3.connect(f"file:{g.data / 'gflow.db'}?mode=ro", uri=True, timeout=5)
    try:
        return db.execute("SELECT id, job_id, event, kind, dest, attempts, state, last_error "
                          "FROM notify_outbox ORDER BY id").fetchall()
    finally:
        db.close()


def metric(g, name):
    for line in g.api("GET", "/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def by_job_event(receiver):
    return {(p["job_id"], p["event"]) for p in receiver.payloads()}


# ---------------------------------------------------------------- webhooks

def test_webhook_payload_signature_and_event_filter(make_gflow, receivers):
    r = receivers()
    other = receivers()
    g = start(make_gflow, [
        {"url": r.url, "events": ["job_started", "job_completed", "job_failed"],
         "secret": SECRET, "headers": {"Authorization": "Bearer token123"}},
        # Nobody's jobs match: this receiver gets nothing, and no row is even recorded.
        {"url": other.url, "events": ["*"], "filter_users": ["no-such-user-here"]},
    ])
    ok = g.submit("-J", "good", "true")
    bad = g.submit("-J", "bad", "-P", "proj", "exit 3")
    g.wait_state(ok)
    g.wait_state(bad)
    r.wait(4)
    wait_for(lambda: metric(g, "gflow_notifications_pending") == 0, "nothing pending")
    assert by_job_event(r) == {(ok, "job_started"), (ok, "job_completed"),
                               (bad, "job_started"), (bad, "job_failed")}
    assert len(r.got()) == 4  # job_submitted is not among the events asked for
    assert other.got() == []
    assert all(row[4] == r.url for row in outbox(g)), outbox(g)

    for _, headers, body, _ in r.got():
        p = json.loads(body)
        # The signature is HMAC-SHA256 of the exact body.
        want = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        assert headers["X-Gflow-Signature"] == want
        assert headers["Authorization"] == "Bearer token123"
        assert headers["Content-Type"] == "application/json"
        assert headers["X-Gflow-Event"] == p["event"]
        assert headers["X-Gflow-Delivery"] == p["delivery_id"]
        assert p["user"] and p["hostname"] and p["timestamp"] > 0
    failed = next(p for p in r.payloads() if p["event"] == "job_failed")
    assert failed["delivery_id"] == f"{bad}-job_failed"
    assert failed["name"] == "bad" and failed["project"] == "proj"
    assert failed["state"] == "F" and failed["reason"] == "NonZeroExitCode"
    assert failed["exit_code"] == 3 and failed["end_time"] >= failed["start_time"] > 0
    done = next(p for p in r.payloads() if p["event"] == "job_completed")
    assert done["state"] == "CD" and done["exit_code"] == 0 and done["reason"] is None
    assert metric(g, "gflow_notifications_sent_total") == 4


def test_failing_receiver_is_retried_with_the_same_delivery_id(make_gflow, receivers):
    r = receivers(fail_first=2)
    g = start(make_gflow, [{"url": r.url, "events": ["job_completed"], "max_retries": 3}])
    job = g.submit("true")
    got = r.wait(3)
    ids = {h["X-Gflow-Delivery"] for _, h, _, _ in got}
    assert ids == {f"{job}-job_completed"}
    assert [code for *_, code in got] == [500, 500, 200]
    # Backoff: the second wait is longer than the first (1 s, then 2 s).
    gaps = [got[i + 1][0] - got[i][0] for i in range(2)]
    assert gaps[1] > gaps[0] > 0.5, gaps
    wait_for(lambda: outbox(g)[0][6] == 1, "the row marked sent")
    row = outbox(g)[0]
    assert row[5] == 3  # attempts
    assert metric(g, "gflow_notifications_retries_total") == 2
    assert metric(g, "gflow_notifications_sent_total") == 1


def test_retries_run_out_and_permanent_errors_are_not_retried(make_gflow, receivers):
    down = receivers(status=503)
    gone = receivers(status=404)
    g = start(make_gflow, [{"url": down.url, "events": ["job_completed"], "max_retries": 1},
                           {"url": gone.url, "events": ["job_completed"], "max_retries": 5}])
    job = g.submit("true")
    g.wait_state(job)
    wait_for(lambda: metric(g, "gflow_notifications_failed_total") == 2, "both given up")
    rows = {row[4]: row for row in outbox(g)}
    assert rows[down.url][5:7] == (2, 2)  # 1 + max_retries attempts, failed
    assert "HTTP 503" in rows[down.url][7]
    assert rows[gone.url][5:7] == (1, 2)  # 404: permanent at once
    assert "HTTP 404" in rows[gone.url][7]
    assert len(down.got()) == 2 and len(gone.got()) == 1
    # The daemon serves on.
    assert g.health_ok()
    g.wait_state(g.submit("true"))


def test_nothing_lost_across_sigkill(make_gflow, receivers):
    r = receivers()
    r.stop()  # down: connections are refused
    g = start(make_gflow, [{"url": r.url, "events": ["job_completed"], "max_retries": 20}])
    job = g.submit("true")
    g.wait_state(job)
    wait_for(lambda: any(row[5] >= 1 for row in outbox(g)), "a failed first attempt")
    g.kill_daemon()
    assert outbox(g)[0][6] == 0  # still pending in the database
    r.start()
    g.up("-c", g.conf)
    got = r.wait(1)
    assert json.loads(got[0][2])["delivery_id"] == f"{job}-job_completed"
    wait_for(lambda: outbox(g)[0][6] == 1, "the row marked sent")


def test_job_that_ends_while_the_daemon_is_down_is_notified(make_gflow, receivers):
    r = receivers()
    g = start(make_gflow, [{"url": r.url, "events": ["job_completed"]}])
    done = g.work / "done"
    job = g.submit(f"sleep 0.5; touch {done}")
    g.wait_state(job, "R")
    g.kill_daemon()
    wait_for(lambda: done.exists(), "the job to finish without the daemon")
    g.up("-c", g.conf)
    got = r.wait(1)
    p = json.loads(got[0][2])
    assert (p["job_id"], p["event"], p["state"]) == (job, "job_completed", "CD")


def test_hanging_receiver_does_not_delay_scheduling(make_gflow, receivers):
    r = receivers(hang=True)
    g = start(make_gflow, [{"url": r.url, "events": ["*"], "timeout_secs": 30}],
              extra="max_concurrent_deliveries = 2\n")
    t0 = time.monotonic()
    for i in range(5):
        g.wait_state(g.submit("true"), timeout=5)
    assert time.monotonic() - t0 < 10
    # The deliveries are stuck, at most two at a time; the rest wait their turn.
    assert metric(g, "gflow_notifications_in_flight") == 2
    assert metric(g, "gflow_notifications_pending") >= 10


def test_reload_picks_up_webhooks(make_gflow, receivers):
    r = receivers()
    g = start(make_gflow, [])
    first = g.submit("true")
    g.wait_state(first)
    write_config(g, [{"url": r.url, "events": ["job_completed"]}])
    out = g.gflowd("-c", g.conf, "reload", check=True)
    assert "notifications" in out.stdout + out.stderr
    second = g.submit("true")
    r.wait(1)
    assert by_job_event(r) == {(second, "job_completed")}


def test_config_errors_are_one_line(make_gflow):
    g = make_gflow(start=False)
    cases = [
        ([{"url": "ftp://example.com/x"}], "is not an http:// or https:// URL"),
        ([{"url": "http://127.0.0.1:1/x", "events": ["job_exploded"]}], "unknown event"),
        ([{"events": ["job_failed"]}], "needs a url"),
        ([{"url": "http://127.0.0.1:1/x", "retries": 3}], "unknown key"),
    ]
    for hooks, needle in cases:
        conf = write_config(g, hooks)
        cp = g.gflowd("-c", conf, "up")
        assert cp.returncode != 0
        err = cp.stderr.strip()
        assert len(err.splitlines()) == 1 and needle in err and str(conf) in err, err
    assert g.lock_holder() is None


# ---------------------------------------------------------------- e-mail

@pytest.fixture
def fake_sendmail():
    """A directory (world-readable, for the throwaway user) with a sendmail that writes
    its argv, uid and message to out/mail.<pid>."""
    root = Path(tempfile.mkdtemp(prefix="gf-mail-", dir="/tmp"))
    (root / "bin").mkdir()
    (root / "out").mkdir()
    os.chmod(root, 0o755)
    os.chmod(root / "bin", 0o755)
    os.chmod(root / "out", 0o777)
    sm = root / "bin" / "sendmail"
    sm.write_text(f'#!/bin/sh\n{{ echo "ARGV: $*"; echo "UID: $(id -u)"; cat; }} '
                  f'> {root}/out/mail.$$.tmp && mv {root}/out/mail.$$.tmp {root}/out/mail.$$\n')
    sm.chmod(0o755)
    yield root
    import shutil
    shutil.rmtree(root, ignore_errors=True)


def mails(root):
    out = []
    for p in sorted((root / "out").glob("mail.*")):
        if p.suffix == ".tmp":
            continue
        text = p.read_text()
        head, _, body = text.partition("\n\n")
        lines = head.splitlines()
        out.append({"argv": lines[0], "uid": int(lines[1].split()[1]),
                    "headers": lines[2:], "body": body})
    return out


def header(mail, name):
    for h in mail["headers"]:
        if h.startswith(name + ": "):
            return h[len(name) + 2:]
    return None


def mail_env(fake_sendmail):
    return {"PATH": f"{fake_sendmail}/bin:" + os.environ.get("PATH", "/usr/bin:/bin")}


def test_email_default_events_and_aliases(make_gflow, fake_sendmail):
    g = start(make_gflow, [], env=mail_env(fake_sendmail))
    # Default with an address only: completed, failed, timeout, cancelled (not started).
    a = g.submit("--notify-email", "alice@example.com", "--notify-email", "bob@example.com",
                 "-J", "fails", "exit 1")
    g.wait_state(a)
    wait_for(lambda: len(mails(fake_sendmail)) >= 1, "a mail")
    # gflow's short names: begin -> job_started, end -> job_completed.
    b = g.submit("--notify-email", "carol@example.com", "--notify-on", "begin,end", "true")
    assert g.job(b)["notify_on"] == ["job_started", "job_completed"]
    g.wait_state(b)
    wait_for(lambda: len(mails(fake_sendmail)) >= 3, "three mails")
    wait_for(lambda: metric(g, "gflow_notifications_pending") == 0, "nothing pending")
    ms = mails(fake_sendmail)
    assert len(ms) == 3
    assert all(m["argv"] == "ARGV: -t -i" for m in ms)
    subjects = sorted(header(m, "Subject") for m in ms)
    assert subjects == sorted([f"gflow job {a} (fails) failed", f"gflow job {b} (gjob-{b}) started",
                               f"gflow job {b} (gjob-{b}) completed"])
    fail = next(m for m in ms if header(m, "Subject").endswith("failed"))
    assert header(fail, "To") == "alice@example.com,bob@example.com"
    assert "Reason:    NonZeroExitCode" in fail["body"] and "Exit code: 1" in fail["body"]


def test_email_header_injection_is_refused(make_gflow, fake_sendmail):
    g = start(make_gflow, [], env=mail_env(fake_sendmail))
    spec = {"command": "true", "workdir": str(g.work), "name": "x\r\nBcc: victim@example.com",
            "notify_email": "alice@example.com"}
    r = g.api("POST", "/v1/jobs", spec)
    assert r.status == 400 and "name" in r.text
    spec = {"command": "true", "workdir": str(g.work),
            "notify_email": "alice@example.com\nBcc: victim@example.com"}
    r = g.api("POST", "/v1/jobs", spec)
    assert r.status == 400 and "notify-email" in r.text
    assert g.health_ok() and mails(fake_sendmail) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="sending as the submitter needs a root daemon")
def test_email_is_sent_as_the_submitter(make_gflow, fake_sendmail):
    uid, gid, home = ensure_test_user()
    g = start(make_gflow, [], env=mail_env(fake_sendmail))
    os.chmod(g.root, 0o755)  # the user's gbatch reaches the socket
    workdir = g.root / "userwork"
    workdir.mkdir()
    os.chown(workdir, uid, gid)
    job = g.submit("--notify-email", "me@example.com", "true", user=as_user(uid, gid),
                   cwd=workdir, env={"HOME": home, "USER": TEST_USER})
    g.wait_state(job)
    wait_for(lambda: mails(fake_sendmail), "the mail")
    m = mails(fake_sendmail)[0]
    assert m["uid"] == uid
    assert header(m, "Subject") == f"gflow job {job} (gjob-{job}) completed"

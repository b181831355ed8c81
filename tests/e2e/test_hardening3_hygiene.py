"""Issue 27, item 8 (terminal hygiene and the full disk's log flood), tried as hostile
local users would:

- a job's name or command carrying C0 and C1 controls (BEL, ESC, U+009B, the 8-bit CSI)
  or bidi overrides (U+202E) reaches every other user's terminal through gqueue, gjob
  show and the messages: they must show as visible escapes there, and stay exact in JSON;
- a job that floods the logs' filesystem is named in `gflowd status`, its log is cut to
  its last MiBs (with a note) when it ends, and the output the other jobs lost is counted
  in their `gjob show`.

The tests switch users and mount a tmpfs: they need root (they are in CI)."""
import json
import os
import pty
import subprocess

import pytest

from conftest import TEST_USER, as_user, binary, ensure_user, per_worker, wait_for
from test_disk import free_bytes, small_fs  # noqa: F401 (a fixture)

OTHER_USER = per_worker("gflowtest-hyg")

# What a hostile name and command carry: the 8-bit CSI (ED: clear the screen), a
# right-to-left override, a left-to-right isolate; BEL, ESC (a colour) and DEL.
EVIL_NAME = "a\u009b2Jb\u202ec\u2066d"
EVIL_COMMAND = "echo x\x07y\x1b[31mz\u009b2J\u202e\x7f"
RAW = ("\u009b", "\u202e", "\u2066", "\x07", "\x1b", "\x7f")


def assert_no_raw(text, where):
    for c in RAW:
        assert c not in text, f"{where}: raw {c!r} in {text!r}"


def users(owner):
    uid, gid, home = owner
    ouid, ogid, ohome = ensure_user(OTHER_USER)
    alice = (as_user(uid, gid), {"HOME": home, "USER": TEST_USER})
    bob = (as_user(ouid, ogid), {"HOME": ohome, "USER": OTHER_USER})
    return alice, bob


def test_controls_and_bidi_are_escaped_for_humans_and_exact_in_json(make_gflow, owner):
    g = make_gflow()
    os.chmod(g.root, 0o755)
    (alice, alice_env), (bob, bob_env) = users(owner)
    work = g.root / "alicework"
    work.mkdir()
    os.chown(work, owner[0], owner[1])
    evil = g.submit("-H", "-J", EVIL_NAME, EVIL_COMMAND, user=alice, cwd=work, env=alice_env)
    plain = g.submit("-H", "-J", "plain", "true", user=alice, cwd=work, env=alice_env)

    def as_bob(*args):
        cp = g.run(*args, user=bob, cwd="/", env=bob_env)
        assert cp.returncode == 0, (args, cp.stderr)
        return cp.stdout

    # gqueue's table (the default columns and a --format with the command), CSV and the
    # one-job view, as another user sees them.
    table = as_bob("gqueue", "-u", "all", "-f", "JOBID,NAME,USER,COMMAND")
    assert_no_raw(table, "gqueue")
    assert "a\\u009b2Jb\\u202ec\\u2066d" in table, table
    assert "x\\x07y\\x1b[31mz\\u009b2J\\u202e\\x7f" in table, table
    # Column widths count the escapes as they are shown: USER starts at one offset.
    lines = [l for l in table.splitlines() if l.strip()]
    cols = {l.index(TEST_USER) for l in lines[1:]}
    assert len(lines) == 3 and cols == {lines[0].index("USER")}, table
    assert_no_raw(as_bob("gqueue", "-u", "all"), "gqueue default")
    csv = as_bob("gqueue", "-u", "all", "-o", "csv", "-f", "JOBID,NAME,COMMAND")
    assert_no_raw(csv, "gqueue -o csv")
    assert "\\u202e" in csv, csv
    show = as_bob("gjob", "show", evil)
    assert_no_raw(show, "gjob show")
    assert "  Name=a\\u009b2Jb\\u202ec\\u2066d\n" in show, show
    assert "  Command=echo x\\x07y\\x1b[31mz\\u009b2J\\u202e\\x7f\n" in show, show

    # JSON keeps the bytes exact, for every reader.
    for args in (("gjob", "show", "-o", "json", evil), ("gqueue", "-u", "all", "-o", "json")):
        doc = json.loads(as_bob(*args))
        jobs = doc["jobs"] if isinstance(doc, dict) and "jobs" in doc else doc
        jobs = jobs if isinstance(jobs, list) else [jobs]
        mine = [j for j in jobs if j["id"] == evil]
        assert mine and mine[0]["name"] == EVIL_NAME, doc
        assert mine[0]["command"] == EVIL_COMMAND, doc

    # Messages that quote what a user wrote: gjob update's report of a new name, and an
    # error quoting an argument.
    cp = g.run("gjob", "update", plain, "-J", "p\u202eq\u009b", user=alice, cwd=work,
               env=alice_env)
    assert cp.returncode == 0, cp.stderr
    assert_no_raw(cp.stdout, "gjob update")
    assert "p\\u202eq\\u009b" in cp.stdout, cp.stdout
    cp = g.run("gqueue", "-s", "R\u009b2J\x1b", user=bob, cwd="/", env=bob_env)
    assert cp.returncode != 0
    assert_no_raw(cp.stderr, "gqueue's error")
    assert "\\u009b2J\\x1b" in cp.stderr, cp.stderr


def on_tty(g, prog, *args, user=None, env=None):
    """Runs one of the commands with its stdout on a fresh terminal; what the terminal
    got (its newlines as \\r\\n)."""
    master, slave = pty.openpty()
    full_env = dict(g.env, **(env or {}))
    argv = list(user or []) + [binary(prog), *map(str, args)]
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE,
                         env=full_env, cwd="/")
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the command closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert p.wait(timeout=30) == 0, p.stderr.read()
    return out.decode("utf-8", "replace")


def test_another_users_log_is_escaped_on_an_admins_terminal(make_gflow, owner):
    g = make_gflow()
    os.chmod(g.root, 0o755)
    (alice, alice_env), _ = users(owner)
    work = g.root / "alicework"
    work.mkdir()
    os.chown(work, owner[0], owner[1])
    # An OSC 52 clipboard write, the 8-bit CSI and a bidi override; then plain UTF-8.
    job = g.submit("printf 'a\\033]52;c;SGk=\\007b\\302\\233c\\342\\200\\256d\\ncaf\\303\\251\\n'",
                   user=alice, cwd=work, env=alice_env)
    assert g.wait_state(job)["state"] == "CD"
    raw = "a\x1b]52;c;SGk=\x07b\u009bc\u202ed\r\ncaf\u00e9\r\n"
    # root (an admin) reads alice's log on a terminal: escaped, the rest as it is.
    assert on_tty(g, "gjob", "log", job) == \
        "a\\x1b]52;c;SGk=\\x07b\\u009bc\\u202ed\r\ncaf\u00e9\r\n"
    # --raw, a pipe, and alice herself get the bytes.
    assert on_tty(g, "gjob", "log", "--raw", job) == raw
    assert on_tty(g, "gjob", "log", job, user=alice, env=alice_env) == raw
    cp = g.run("gjob", "log", job, check=True)
    assert cp.stdout == raw.replace("\r\n", "\n")


# ---------------------------------------------------------------- the full disk's log flood

MiB = 1024 * 1024
KEEP = 2 * MiB  # daemon.log_keep_on_full_disk, below its default of 4 MiB


def user_dir(g, name, owner):
    d = g.root / name
    d.mkdir()
    os.chown(d, owner[0], owner[1])
    return d


def test_log_flood_is_named_cut_when_it_ends_and_others_losses_counted(small_fs, make_gflow,
                                                                       owner):
    logs = small_fs(24)
    os.chmod(logs, 0o1777)  # a shared log directory, sticky (as /tmp)
    g = make_gflow(env={"GFLOW_DAEMON__LOG_DIR": str(logs),
                        "GFLOW_DAEMON__LOG_KEEP_ON_FULL_DISK": str(KEEP)})
    os.chmod(g.root, 0o755)
    (alice, alice_env), (bob, bob_env) = users(owner)
    bob_ids = ensure_user(OTHER_USER)
    trigger = g.root / "go"

    # bob's job runs first, and writes once the disk is full.
    victim = g.submit(f"while [ ! -e {trigger} ]; do sleep 0.05; done; "
                      "head -c 100000 /dev/zero | tr '\\0' v; echo",
                      user=bob, cwd=user_dir(g, "bobwork", bob_ids), env=bob_env)
    g.wait_state(victim, "R")
    # alice's floods the logs' filesystem (64 MiB of output into 24), then stays.
    flood = g.submit("dd if=/dev/zero bs=1M count=64 status=none | tr '\\0' f; sleep 600",
                     user=alice, cwd=user_dir(g, "alicework", owner), env=alice_env)
    wait_for(lambda: free_bytes(logs) < 1 * MiB, "the logs' filesystem to fill up", timeout=60)

    # gflowd status names the flooder, in its text and its JSON.
    def named():
        st = g.api("GET", "/v1/status").json()
        return st if (st.get("log_flooder") or {}).get("id") == flood else None
    st = wait_for(named, "gflowd status to name the flooding job", timeout=20)
    assert st["log_flooder"]["user"] == TEST_USER and st["log_flooder"]["log_bytes"] > 16 * MiB
    text = g.run("gflowd", "status", check=True).stdout
    assert f"job {flood} ({TEST_USER}" in text and "largest log" in text, text

    # bob's output is lost to the full disk, and counted in his job.
    trigger.touch()
    done = g.wait_state(victim, timeout=30)
    assert done["state"] == "CD", done
    assert 0 < done["log_lost_bytes"] <= 100001, done
    show = g.run("gjob", "show", victim, user=bob, cwd="/", env=bob_env, check=True).stdout
    n = done['log_lost_bytes']
    assert f"  LogLost={n} byte{'s' if n != 1 else ''} of output" in show, show

    # Cancelling the flooder cuts its log to its last KEEP bytes, which says so at its top,
    # and the space comes back.
    cp = g.run("gcancel", flood, user=alice, cwd="/", env=alice_env)
    assert cp.returncode == 0, cp.stderr
    g.wait_state(flood, "CA", timeout=30)
    log = logs / f"{flood}.log"
    data = log.read_bytes()
    first, _, rest = data.partition(b"\n")
    assert first.startswith(b"gflow-shim: the first ") and b"were cut" in first, first[:200]
    assert b"log_keep_on_full_disk" in first, first
    assert KEEP - 64 * 1024 <= len(rest) <= KEEP + 4096, len(rest)
    assert set(rest[:KEEP // 2]) == {ord("f")}, rest[:100]
    assert free_bytes(logs) > 16 * MiB
    wait_for(lambda: g.api("GET", "/v1/status").json()["disk_full"] is None,
             "gflowd to see room again", timeout=20)
    # A job of bob's that lost nothing shows no loss.
    ok = g.submit("echo fine", user=bob, cwd=g.root / "bobwork", env=bob_env)
    assert g.wait_state(ok, timeout=20).get("log_lost_bytes") is None

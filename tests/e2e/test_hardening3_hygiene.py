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

import pytest

from conftest import TEST_USER, as_user, ensure_user, per_worker, wait_for

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
    assert "Name: a\\u009b2Jb\\u202ec\\u2066d" in show, show
    assert "Command: echo x\\x07y\\x1b[31mz\\u009b2J\\u202e\\x7f" in show, show

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

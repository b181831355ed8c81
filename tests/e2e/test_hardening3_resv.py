"""Reservations that cannot be a weapon (issue 27, item 3). Any user could reserve every
GPU for ten years, a hundred years ahead, or make 20,000 one-minute reservations that
kept every untimed GPU job waiting; only an admin could undo them.

Now [reservations] who = "admins" (the default) lets only admins reserve, as Slurm does;
with who = "users" a user's reservations are bounded by reservations.max_gpus,
max_duration, max_ahead and max_per_user (admins are not), each refusal naming the key
and its value. 20,000 reservations do not stall the planner: a pass reads the live ones
once (sorted by start), and an untimed job is kept only off the GPUs of reservations
that begin within its planned runtime (scheduler.default_time_limit).

On the NVML simulator, as root; the users are throwaway ones."""
import http.client
import json
import os
import time

import pytest

from conftest import (TEST_USER, UnixHTTPConnection, as_user, assert_one_line_error,
                      ensure_user, parse_table, per_worker, wait_for)

ADMIN_USER = per_worker("gflowtest-radm")
ADMIN_GROUP = per_worker("gflowtest-radmins")


def sim(make_gflow, n=4, **settings):
    """A daemon on n simulated GPUs; settings: "section.key" -> value as environment
    variables (GFLOW_SECTION__KEY)."""
    env = {"GFLOW_DAEMON__ADMIN_GROUP": ADMIN_GROUP}
    for key, value in settings.items():
        section, name = key.split(".")
        env[f"GFLOW_{section.upper()}__{name.upper()}"] = str(value)
    g = make_gflow(start=False, env=env)
    g.up("--simulate-gpus", n)
    os.chmod(g.root, 0o755)
    return g


def person(g, name, groups=()):
    """run() keyword arguments that act as user `name` (created if needed)."""
    uid, gid, home = ensure_user(name, groups)
    return {"user": as_user(uid, gid), "cwd": "/", "env": {"HOME": home, "USER": name}}


@pytest.fixture
def users(owner):
    """(the plain user's run() kwargs maker, the admin's) for a daemon g."""
    ensure_user(ADMIN_USER, (ADMIN_GROUP,))
    return (lambda g: person(g, TEST_USER)), (lambda g: person(g, ADMIN_USER, (ADMIN_GROUP,)))


def create(g, *args, **kw):
    return g.run("gctl", "reserve", "create", *args, **kw)


def created(cp):
    assert cp.returncode == 0, (cp.stdout, cp.stderr)
    assert cp.stdout.startswith("Reservation created successfully.\n"), cp.stdout
    return dict(l.split(": ", 1) for l in cp.stdout.splitlines() if ": " in l)


def count(g):
    return len(g.api("GET", "/v1/reservations").json()["reservations"])


# ---------------------------------------------------------------- who may reserve

def test_only_admins_reserve_by_default(make_gflow, users):
    plain, admin = users
    g = sim(make_gflow)
    # The attacks, as a plain user: all GPUs for 10 years, 100 years ahead.
    for args in (("--gpus", "4", "--start", "now", "--duration", "3650d"),
                 ("--gpus", "1", "--start", "now+36500d", "--duration", "1h")):
        cp = create(g, *args, **plain(g))
        assert_one_line_error(cp, "gctl", 1, "only admins", 'reservations.who = "users"')
    assert count(g) == 0
    # The refusal is a 403 in the API.
    cp = g.run("/usr/bin/python3", "-c", POST, str(g.sock), "/v1/reservations",
               json.dumps({"gpus": 1, "start": time.time() + 60, "duration": 60}), **plain(g))
    assert cp.stdout.split()[0] == "403", cp.stdout
    # Admins (the admin group, root) reserve as before, for themselves or for the user.
    created(create(g, "--gpus", "1", "--start", "now+1h", "--duration", "1h", **admin(g)))
    mine = created(create(g, "--user", TEST_USER, "--gpus", "1", "--start", "now+3h",
                          "--duration", "1h"))
    assert mine["User"] == TEST_USER
    # The holder may still cancel their own reservation.
    cp = g.run("gctl", "reserve", "cancel", mine["ReservationID"], **plain(g))
    assert cp.returncode == 0, cp.stderr
    # And the daemon serves everyone else all along.
    assert g.wait_state(g.submit("-g", "1", "-t", "0:30", "true"))["state"] == "CD"


def test_reload_lets_users_reserve(make_gflow, users):
    plain, _ = users
    g = make_gflow(start=False, env={"GFLOW_DAEMON__ADMIN_GROUP": ADMIN_GROUP})
    conf = g.root / "gflow.toml"
    conf.write_text("")
    g.up("-c", conf, "--simulate-gpus", 2)
    os.chmod(g.root, 0o755)
    args = ("--gpus", "1", "--start", "now+1h", "--duration", "1h")
    assert_one_line_error(create(g, *args, **plain(g)), "gctl", 1, "only admins")
    conf.write_text('[reservations]\nwho = "users"\nmax_per_user = 1\n')
    out = g.gflowd("-c", conf, "reload", check=True).stdout
    assert "reservations.who" in out and "restart" not in out.lower(), out
    created(create(g, *args, **plain(g)))
    cp = create(g, "--gpus", "1", "--start", "now+3h", "--duration", "1h", **plain(g))
    assert_one_line_error(cp, "gctl", 1, "reservations.max_per_user = 1")


def test_bad_who_setting_is_refused(make_gflow):
    g = make_gflow(start=False, env={"GFLOW_RESERVATIONS__WHO": "everyone"})
    cp = g.gflowd("up", "--simulate-gpus", "1")
    assert cp.returncode != 0
    assert "reservations.who must be one of admins, users" in cp.stderr, cp.stderr


# ---------------------------------------------------------------- the users' limits

LIMITS = {"reservations.who": "users", "reservations.max_gpus": 2,
          "reservations.max_duration": "2h", "reservations.max_ahead": "1d",
          "reservations.max_per_user": 2}


def test_users_limits_each_refused_by_name(make_gflow, users):
    plain, _ = users
    g = sim(make_gflow, **LIMITS)
    me = plain(g)
    for args, needles in [
        (("--gpus", "3", "--start", "now+1h", "--duration", "1h"),
         ("3 GPUs", "reservations.max_gpus", "2")),
        (("--gpu-spec", "0-2", "--start", "now+1h", "--duration", "1h"),
         ("3 GPUs", "reservations.max_gpus", "2")),
        (("--gpus", "1", "--start", "now+1h", "--duration", "3h"),
         ("reservations.max_duration", "2h")),
        (("--gpus", "1", "--start", "now+36500d", "--duration", "1h"),
         ("reservations.max_ahead", "1d")),
        (("--gpus", "4", "--start", "now", "--duration", "3650d"), ("reservations.max_",)),
    ]:
        cp = create(g, *args, **me)
        assert_one_line_error(cp, "gctl", 1, *needles)
    assert count(g) == 0
    # Within the limits: allowed.
    a = created(create(g, "--gpus", "2", "--start", "now+1h", "--duration", "2h", **me))
    assert a["User"] == TEST_USER and a["GPUIndices"] == "2,3", a
    # The GPUs count over all of one's pending and active reservations together.
    cp = create(g, "--gpu-spec", "0", "--start", "now+5h", "--duration", "1h", **me)
    assert_one_line_error(cp, "gctl", 1, "reservations.max_gpus", "2")
    b = created(create(g, "--gpus", "1", "--start", "now+5h", "--duration", "1h", **me))
    assert b["GPUIndices"] in ("2", "3"), b
    # How many at once.
    cp = create(g, "--gpus", "1", "--start", "now+10h", "--duration", "1h", **me)
    assert_one_line_error(cp, "gctl", 1, "2 reservations", "reservations.max_per_user")
    # A cancelled one no longer counts.
    g.run("gctl", "reserve", "cancel", b["ReservationID"], check=True, **me)
    created(create(g, "--gpus", "1", "--start", "now+10h", "--duration", "1h", **me))


def test_admins_are_not_bound_by_the_limits(make_gflow, users):
    _, admin = users
    g = sim(make_gflow, **LIMITS)
    adm = admin(g)
    created(create(g, "--gpus", "4", "--start", "now+30d", "--duration", "3650d", **adm))
    for k in range(3):
        created(create(g, "--gpu-spec", str(k), "--start", f"now+{k + 1}h", "--duration", "5h",
                       **adm))
    # Root too, for another user.
    created(create(g, "--user", TEST_USER, "--gpus", "1", "--start", "now+6h",
                   "--duration", "1d"))
    assert count(g) == 5


def test_gctl_quota_shows_the_reservation_limits(make_gflow, users):
    plain, _ = users
    g = sim(make_gflow, **LIMITS)
    created(create(g, "--gpus", "1", "--start", "now+1h", "--duration", "1h", **plain(g)))
    q = g.api("GET", f"/v1/quotas?user={TEST_USER}").json()["reservations"]
    assert q == {"who": "users", "max_gpus": 2, "max_duration": 7200, "max_ahead": 86400,
                 "max_per_user": 2, "user": TEST_USER, "held": 1, "held_gpus": 1}, q
    out = g.run("gctl", "quota", "show", TEST_USER, check=True, **plain(g)).stdout
    line = [l for l in out.splitlines() if l.startswith("Reservations:")]
    assert line == [f"Reservations: users may reserve, at most 2 GPUs, 2h long, starting "
                    f"within 1d, 2 at once; {TEST_USER} holds 1 (1 GPU)"], out
    # Admins only (the default): said so.
    d = sim(make_gflow)
    out = d.run("gctl", "quota", "show", check=True).stdout
    assert "Reservations: admins only (reservations.who)" in out, out


# ---------------------------------------------------------------- 20,000 reservations

POST = """
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
body = sys.argv[3].encode()
s.sendall(b"POST " + sys.argv[2].encode() + b" HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n"
          b"Content-Type: application/json\\r\\nContent-Length: " + str(len(body)).encode() +
          b"\\r\\n\\r\\n" + body)
data = b""
while True:
    c = s.recv(65536)
    if not c:
        break
    data += c
print(data.split()[1].decode(), data.split(b"\\r\\n\\r\\n", 1)[1].decode())
"""


def bulk_reserve(g, bodies):
    """POSTs each body on one kept-alive connection (as root); their statuses."""
    conn = UnixHTTPConnection(g.sock, timeout=60)
    statuses = []
    try:
        for b in bodies:
            conn.request("POST", "/v1/reservations", body=json.dumps(b),
                         headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            statuses.append(r.status)
    finally:
        conn.close()
    return statuses


def test_a_user_cannot_make_20000_reservations(make_gflow, users):
    plain, _ = users
    g = sim(make_gflow, **{"reservations.who": "users", "reservations.max_per_user": 3})
    me = plain(g)
    for k in range(3):
        created(create(g, "--gpus", "1", "--start", f"now+{k + 1}h", "--duration", "1m", **me))
    cp = create(g, "--gpus", "1", "--start", "now+5h", "--duration", "1m", **me)
    assert_one_line_error(cp, "gctl", 1, "3 reservations", "reservations.max_per_user")
    assert count(g) == 3


N_BULK = 20000


def test_20000_reservations_do_not_stall_the_planner(make_gflow, owner):
    """An admin's 20,000 one-minute reservations for a user, back to back on both GPUs
    from 2 h ahead (past scheduler.default_time_limit = 1h), made latest first: an
    untimed job is planned to end before the first, so it starts; a job that waits for
    GPUs behind the holder's 3-hour job is planned (with backfill) after the last window,
    in a walk that took a quadratic time over windows made in that order; the daemon
    answers at once all along."""
    uid, gid, _ = owner
    g = sim(make_gflow, n=2, **{"scheduler.default_time_limit": "1h", "scheduler.backfill": "true"})
    t0 = time.time() + 2 * 3600
    statuses = bulk_reserve(g, ({"user": TEST_USER, "gpu_spec": [0, 1], "start": t0 + 60 * k,
                                 "duration": 60} for k in reversed(range(N_BULK))))
    assert statuses == [201] * N_BULK
    assert count(g) == N_BULK
    # Another user's untimed job holds both GPUs: nothing reserved starts within its
    # planned hour.
    untimed = g.submit("-g", "2", "true")
    assert g.wait_state(untimed)["state"] == "CD"
    # The holder's 3-hour job on one GPU (their own windows do not stop it).
    work = g.root / "holder-work"
    work.mkdir()
    os.chown(work, uid, gid)
    mine = g.submit("-g", "1", "-t", "3:00:00", f"while [ ! -e {g.work}/go ]; do sleep 0.05; done",
                    user=as_user(uid, gid), cwd=work)
    g.wait_state(mine, "R")
    # A 30-second job on both GPUs waits for that one, and then for every window.
    short2 = g.submit("-g", "2", "-t", "0:30", "true")
    wait_for(lambda: g.job(short2)["expected_start"] is not None, "the job to be planned",
             timeout=20)
    assert abs(g.job(short2)["expected_start"] - (t0 + 60 * N_BULK)) < 2, g.job(short2)
    assert g.job(short2)["state"] == "PD"
    # One-GPU jobs, timed and untimed, run beside it.
    for args in (("-t", "0:30"), ()):
        assert g.wait_state(g.submit("-g", "1", *args, "true"), timeout=20)["state"] == "CD"
    # Each submission makes a pass (which plans the waiting job again); a request made
    # just after waits for it. It took seconds (a walk over windows made latest first
    # was quadratic); now a pass reads the windows once.
    worst = 0
    for _ in range(3):
        g.submit("-g", "1", "-t", "0:30", "true")
        t = time.monotonic()
        g.api("GET", "/v1/health")
        worst = max(worst, time.monotonic() - t)
    assert worst < 1, f"a request waited {worst:.1f} s for a scheduling pass"
    (g.work / "go").touch()
    g.wait_state(mine)

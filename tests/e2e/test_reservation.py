"""GPU reservations (issue 12, gctl reserve): a reservation blocks other users' jobs on its
GPUs only during its window (before it a job that would still run at its start is kept
off them), the holder's job runs on the reserved GPUs, only admins reserve for others,
list/get/cancel and the history, clashes refused, and reservations survive a restart.
On the NVML simulator, as root (a system daemon): the holder is the unprivileged test
user, the "others" are root's jobs. Windows are a few seconds; every wait polls with a
deadline."""
import os

import pytest

from conftest import (TEST_USER, as_user, assert_one_line_error, ensure_test_user,
                      parse_show, parse_table, wait_for)


def wait_go(name):
    return f"while [ ! -e {name} ]; do sleep 0.02; done"


def sim(make_gflow, n=2, extra=None, **env):
    """A daemon on n simulated GPUs; env: scheduler settings; extra: more variables."""
    g = make_gflow(start=False, env={**{f"GFLOW_SCHEDULER__{k.upper()}": v
                                        for k, v in env.items()}, **(extra or {})})
    g.up("--simulate-gpus", n)
    return g


def reserve(g, *args, **kw):
    cp = g.run("gctl", "reserve", "create", *args, **kw)
    assert cp.returncode == 0, cp
    fields = dict(l.split(": ", 1) for l in cp.stdout.splitlines() if ": " in l)
    assert cp.stdout.startswith("Reservation created successfully.\n"), cp.stdout
    return fields


def reservations(g, *args):
    cp = g.run("gctl", "reserve", "list", *args, check=True)
    if cp.stdout.strip() == "No reservations found.":
        return []
    return parse_table(cp.stdout)


def status_of(g, rid):
    return g.api("GET", f"/v1/reservations/{rid}").json()["status"]


@pytest.fixture
def holder():
    """(uid, gid) of the test user, who holds the reservations."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the holder is another user")
    uid, gid, _ = ensure_test_user()
    return uid, gid


def as_holder(g, holder):
    """Keyword arguments for g.run/g.submit that act as the holder: the sandbox opened to
    them and a working directory of theirs."""
    uid, gid = holder
    os.chmod(g.root, 0o755)
    work = g.root / "holder-work"
    if not work.exists():
        work.mkdir()
        os.chown(work, uid, gid)
    return {"user": as_user(uid, gid), "cwd": work}


def gqueue_reason(g, job):
    rows = parse_table(g.run("gqueue", "-j", job, check=True).stdout)
    return rows[0]["NODELIST(REASON)"]


@pytest.mark.parametrize("backfill", ["false", "true"])
def test_reservation_blocks_others_only_during_its_window(make_gflow, holder, backfill):
    g = sim(make_gflow, backfill=backfill)
    lead = 6  # seconds until the window: room for the steps before it on a busy machine
    r = reserve(g, "--user", TEST_USER, "--gpu-spec", "1", "--start", f"now+{lead}s",
                "--duration", "6s")
    rid = r["ReservationID"]
    assert r["GPUIndices"] == "1" and r["Status"] == "Pending" and "GPUCount" not in r, r
    # A job without --time would run into the window: it is kept off GPU 1.
    a = g.submit("-g", "1", wait_go("goA"))
    assert g.wait_state(a, "R")["gpu_ids"] == "0"
    # Before the window: a job that ends before it starts on the reserved GPU.
    b = g.submit("-g", "1", "-t", "0:01", "true")
    done = g.wait_state(b)
    assert done["state"] == "CD" and done["gpu_ids"] == "1", done
    assert status_of(g, rid) == "pending", "the steps before the window took too long"
    # One that would not end before it waits with reason Reservation.
    c = g.submit("-g", "1", "-t", "5:00", "true")
    wait_for(lambda: gqueue_reason(g, c) == "(Reservation)", "job C to wait for the reservation")
    assert g.job(c)["state"] == "PD"
    show = parse_show(g.run("gjob", "show", c, check=True).stdout)[0]
    assert show["Reason"] == "Reservation", show
    # During the window it still waits; the holder's job runs on the reserved GPU.
    wait_for(lambda: status_of(g, rid) == "active", "the window to start", timeout=lead + 5)
    h = g.submit("-g", "1", "true", **as_holder(g, holder))
    done = g.wait_state(h)
    assert done["state"] == "CD" and done["gpu_ids"] == "1", done
    assert g.job(c)["state"] == "PD" and gqueue_reason(g, c) == "(Reservation)"
    # After the window the others' job starts there, with no other change (a timer).
    wait_for(lambda: g.job(c)["state"] != "PD", "job C to start after the window", timeout=12)
    assert status_of(g, rid) == "completed"
    assert g.wait_state(c)["gpu_ids"] == "1"
    (g.work / "goA").touch()
    g.wait_state(a)


@pytest.mark.parametrize("backfill", ["false", "true"])
def test_long_job_not_started_on_gpus_reserved_soon(make_gflow, holder, backfill):
    g = sim(make_gflow, backfill=backfill)
    reserve(g, "--user", TEST_USER, "--gpus", "2", "--start", "now+2m", "--duration", "1h")
    long_ = g.submit("-g", "1", "-t", "10:00", "true")   # would still run at the start
    unlimited = g.submit("-g", "1", "true")            # no --time: default_time_limit
    short = g.submit("-g", "1", "-t", "0:30", "true")  # ends long before
    assert g.wait_state(short)["state"] == "CD"
    for job in (long_, unlimited):
        wait_for(lambda: gqueue_reason(g, job) == "(Reservation)", f"job {job} to wait")
        assert g.job(job)["state"] == "PD"
    # The holder's own long job may start on them.
    mine = g.submit("-g", "2", "-t", "10:00", "true", **as_holder(g, holder))
    assert g.wait_state(mine)["state"] == "CD"


def test_only_admins_reserve_for_others(make_gflow, holder):
    # Users may reserve for themselves only where the admin allows it (issue 27: the
    # default is admins only; test_hardening3_resv.py tests that).
    g = sim(make_gflow, extra={"GFLOW_RESERVATIONS__WHO": "users"})
    cp = g.run("gctl", "reserve", "create", "--user", "root", "--gpus", "1", "--start",
               "now+1h", "--duration", "1h", **as_holder(g, holder))
    assert_one_line_error(cp, "gctl", 1, "only root", "for another user")
    assert reservations(g) == []
    # For themself: allowed (with --user naming them, or without it).
    mine = reserve(g, "--gpus", "1", "--start", "now+1h", "--duration", "1h", **as_holder(g, holder))
    assert mine["User"] == TEST_USER
    theirs = reserve(g, "--gpu-spec", "0", "--start", "now+1h", "--duration", "1h")
    assert theirs["User"] == "root"
    # Only the holder or an admin cancels.
    cp = g.run("gctl", "reserve", "cancel", theirs["ReservationID"], **as_holder(g, holder))
    assert_one_line_error(cp, "gctl", 1, "belongs to root", "holder or an admin")
    cp = g.run("gctl", "reserve", "cancel", mine["ReservationID"], **as_holder(g, holder))
    assert cp.returncode == 0 and "cancelled" in cp.stdout, cp
    cp = g.run("gctl", "reserve", "cancel", theirs["ReservationID"])
    assert cp.returncode == 0, cp


def test_list_get_cancel_history_and_clashes(make_gflow):
    g = sim(make_gflow, n=4)
    short = reserve(g, "--gpus", "2", "--start", "now", "--duration", "2s")
    # The highest free ones.
    assert (short["GPUCount"], short["GPUIndices"]) == ("2", "2,3"), short
    later = reserve(g, "--gpu-spec", "0-1", "--start", "now+1h", "--duration", "30m")
    gone = reserve(g, "--gpus", "1", "--start", "now+2h", "--duration", "1h")
    # Clashes: named GPUs already reserved, more GPUs than are free, than exist.
    cp = g.run("gctl", "reserve", "create", "--gpu-spec", "1", "--start", "now+70m",
               "--duration", "1h")
    assert_one_line_error(cp, "gctl", 1, "GPU 1 already reserved",
                          f"reservation {later['ReservationID']}")
    cp = g.run("gctl", "reserve", "create", "--gpus", "3", "--start", "now+1h",
               "--duration", "10m")
    assert_one_line_error(cp, "gctl", 1, "only 2 of the 4 GPUs are free")
    cp = g.run("gctl", "reserve", "create", "--gpus", "5", "--start", "now+5h",
               "--duration", "10m")
    assert_one_line_error(cp, "gctl", 1, "this machine has 4 GPUs")
    # The API says which: 409 for a clash with another reservation, 400 for a bad request.
    t = g.api("GET", f"/v1/reservations/{later['ReservationID']}").json()["start"]
    clash = g.api("POST", "/v1/reservations", {"gpu_spec": [0], "start": t, "duration": 60})
    assert clash.status == 409, clash
    assert g.api("POST", "/v1/reservations", {"gpus": 5, "start": t, "duration": 60}).status == 400
    assert g.api("POST", "/v1/reservations", {"gpus": 1, "gpu_spec": [0], "start": t,
                                              "duration": 60}).status == 400
    # Bad command lines.
    for args, needle in [(("--gpus", "1", "--gpu-spec", "0"), "either --gpus"),
                         (("--gpus", "1", "--duration", "1h"), "--start is required"),
                         (("--gpus", "1", "--start", "now"), "--duration is required"),
                         (("--gpus", "1", "--start", "soon", "--duration", "1h"),
                          "invalid --start"),
                         (("--gpu-spec", "0,x", "--start", "now", "--duration", "1h"),
                          "invalid --gpu-spec")]:
        cp = g.run("gctl", "reserve", "create", *args)
        assert_one_line_error(cp, "gctl", 2, needle)
    cp = g.run("gctl", "reserve", "create", "--gpus", "1", "--start", "2020-01-01",
               "--duration", "1h")
    assert_one_line_error(cp, "gctl", 1, "--start is in the past")
    cp = g.run("gctl", "reserve", "list", "--status", "done")
    assert_one_line_error(cp, "gctl", 2, "invalid --status")

    cp = g.run("gctl", "reserve", "cancel", gone["ReservationID"], check=True)
    assert cp.stdout == f"Reservation {gone['ReservationID']} cancelled successfully\n"
    cp = g.run("gctl", "reserve", "cancel", gone["ReservationID"])
    assert_one_line_error(cp, "gctl", 1, "already cancelled")
    cp = g.run("gctl", "reserve", "cancel", "99")
    assert_one_line_error(cp, "gctl", 1, "no reservation 99")
    # The short one ends: kept in the history as completed.
    wait_for(lambda: status_of(g, short["ReservationID"]) == "completed", "the window to end")
    rows = reservations(g)
    assert [r["ID"] for r in rows] == [short["ReservationID"], later["ReservationID"],
                                       gone["ReservationID"]]
    assert rows[0]["USER"] == "root" and rows[0]["GPUS"] == "2,3"
    assert [r["STATUS"] for r in rows] == ["Completed", "Pending", "Cancelled"]
    assert [r["ID"] for r in reservations(g, "--status", "completed")] == [short["ReservationID"]]
    assert [r["ID"] for r in reservations(g, "--status", "cancelled")] == [gone["ReservationID"]]
    assert [r["ID"] for r in reservations(g, "--status", "pending")] == [later["ReservationID"]]
    assert reservations(g, "--active") == []
    assert reservations(g, "--user", "nobody") == []
    cp = g.run("gctl", "reserve", "get", later["ReservationID"], check=True)
    assert cp.stdout.startswith("Reservation Details:\nID: ")
    got = dict(l.split(": ", 1) for l in cp.stdout.splitlines()[1:])
    assert got["ID"] == later["ReservationID"] and got["User"] == "root"
    assert got["GPUIndices"] == "0,1" and "GPUCount" not in got
    assert got["Duration"] == "00:30:00" and got["Status"] == "Pending"
    assert set(got) == {"ID", "User", "GPUIndices", "StartTime", "EndTime", "Duration",
                        "Status", "CreatedAt"}
    cp = g.run("gctl", "reserve", "cancel", short["ReservationID"])
    assert_one_line_error(cp, "gctl", 1, "already completed")


def test_reservations_survive_a_restart(make_gflow, holder):
    g = sim(make_gflow)
    r = reserve(g, "--user", TEST_USER, "--gpu-spec", "0,1", "--start", "now",
                "--duration", "1h")
    old = g.run("gctl", "reserve", "list", check=True).stdout
    cp = g.gflowd("restart")
    assert cp.returncode == 0, cp
    assert g.run("gctl", "reserve", "list", check=True).stdout == old
    # Still enforced: root's job waits, the holder's runs.
    job = g.submit("-g", "1", "-t", "1:00", "true")
    wait_for(lambda: gqueue_reason(g, job) == "(Reservation)", "root's job to wait")
    mine = g.submit("-g", "1", "true", **as_holder(g, holder))
    assert g.wait_state(mine)["state"] == "CD"
    # Cancelling it lets root's job start at once.
    g.run("gctl", "reserve", "cancel", r["ReservationID"], check=True)
    assert g.wait_state(job)["state"] == "CD"
    new = reserve(g, "--gpus", "1", "--start", "now+1h", "--duration", "1h")
    assert int(new["ReservationID"]) == int(r["ReservationID"]) + 1


def test_backfill_plans_other_users_jobs_after_the_window(make_gflow, holder):
    """With backfill on, a window counts as busy GPUs in the plan: another user's job that
    waits for GPUs and would overlap the window is expected to start after it."""
    g = sim(make_gflow, backfill="true")
    a = g.submit("-g", "2", "-t", "1:00", wait_go("goA"))  # planned to end in 60 s
    started = g.wait_state(a, "R")["start_time"]
    r = reserve(g, "--user", TEST_USER, "--gpu-spec", "0,1", "--start", "now+90s",
                "--duration", "1h")
    info = g.api("GET", f"/v1/reservations/{r['ReservationID']}").json()
    assert info["start"] > started + 60
    b = g.submit("-g", "2", "-t", "1:00", "true")  # [60 s, 120 s] would overlap it
    wait_for(lambda: g.job(b)["expected_start"] is not None, "job B to be planned")
    assert gqueue_reason(g, b) == "(Resources)"
    assert abs(g.job(b)["expected_start"] - info["end"]) < 1, (g.job(b), info)
    (g.work / "goA").touch()
    g.wait_state(a)


def test_preemption_honours_an_active_reservation(make_gflow, holder):
    """With scheduler.preempt on, a --requeue job of another user that holds a reserved GPU
    when the window is active and the holder waits is preempted (SIGTERM, requeued with its
    id), whatever its priority; a job without --requeue is left alone."""
    g = sim(make_gflow, n=2, preempt="true", preempt_grace="5s")
    trap = f"trap 'touch {g.work}/termed; exit 143' TERM; " + wait_go("never") + " & wait"
    victim = g.submit("-g", "1", "--requeue", "-p", "250", trap)
    keeper = g.submit("-g", "1", wait_go("go"))  # no --requeue: never preempted
    gpu_of = {j: g.wait_state(j, "R")["gpu_ids"] for j in (victim, keeper)}
    r = reserve(g, "--user", TEST_USER, "--gpu-spec", f"{gpu_of[victim]},{gpu_of[keeper]}",
                "--start", "now", "--duration", "1h")
    kw = as_holder(g, holder)
    mine = g.submit("-g", "1", "true", **kw)
    wait_for(lambda: (g.work / "termed").exists(), "the requeue job to get SIGTERM", timeout=20)
    wait_for(lambda: g.job(victim)["state"] == "PD", "the victim back in the queue", timeout=20)
    v = g.job(victim)
    assert v["requeue_count"] == 1 and v["preempted_by"] == int(mine), v
    assert g.wait_state(mine, timeout=20)["state"] == "CD"
    assert g.job(mine)["gpu_ids"] == gpu_of[victim]
    assert g.job(keeper)["state"] == "R"  # not --requeue: it runs on
    # The victim may not go back onto the reserved GPUs while the window lasts.
    wait_for(lambda: gqueue_reason(g, victim) == "(Reservation)", "the victim to wait")
    g.run("gctl", "reserve", "cancel", r["ReservationID"], check=True)
    (g.work / "go").touch()
    (g.work / "never").touch()
    assert g.wait_state(keeper)["state"] == "CD"
    assert g.wait_state(victim, timeout=20)["state"] == "CD"

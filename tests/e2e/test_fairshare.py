"""Fair-share and the multifactor priority (issue 12; docs/usage.md, "Fair-share and
priority"): usage per user and project in decayed GPU-seconds, charged as jobs run and
kept across restarts; the queue ordered by the weighted sum of --priority, fair-share and
age when those weights are set in the config file; `gjob show`'s breakdown, `gqueue -f
PRIORITY`, the API's fields and `gctl usage`. On the NVML simulator, as root (the second
user is a throwaway one)."""
import json
import os
import time

from conftest import (TEST_USER, as_user, assert_one_line_error, ensure_test_user,
                      parse_show, parse_table, wait_for)

FAIRSHARE_CONF = "[scheduler]\npriority_weight_fairshare = 1000\n"


def wait_go(name):
    return f"while [ ! -e {name} ]; do sleep 0.02; done"


def sim(make_gflow, conf_text=FAIRSHARE_CONF, gpus=1):
    g = make_gflow(start=False)
    g.conf = g.root / "gflow.toml"
    g.conf.write_text(conf_text)
    g.up("-c", g.conf, "--simulate-gpus", gpus)
    return g


def other_user(g):
    """(submit kwargs, name) for jobs of the throwaway user."""
    uid, gid, home = ensure_test_user()
    os.chmod(g.root, 0o755)
    workdir = g.root / "userwork"
    workdir.mkdir(exist_ok=True)
    os.chown(workdir, uid, gid)
    return {"user": as_user(uid, gid), "cwd": workdir,
            "env": {"HOME": home, "USER": TEST_USER}}, TEST_USER


def usage(g):
    cp = g.run("gctl", "usage", "-o", "json", check=True)
    data = json.loads(cp.stdout)
    return {a["name"]: a for a in data["users"]}, {a["name"]: a for a in data["projects"]}


def used_gpu_s(g, user):
    """GPUs x seconds of the user's ended jobs, from the jobs themselves."""
    return sum(j["gpus"] * (j["end_time"] - j["start_time"])
               for j in g.jobs(state="CD,F,CA,TO", user=user)
               if j["start_time"] and j["end_time"])


def test_fairshare_reorders_two_users_after_one_used_the_gpus(make_gflow):
    g = sim(make_gflow)
    theirs_kw, them = other_user(g)
    me = g.job(g.submit("-H", "true"))["user"]
    # I use the only GPU for a while; then I hold it while both of us queue a job.
    assert g.wait_state(g.submit("-g", "1", "sleep 0.5"))["state"] == "CD"
    blocker = g.submit("-g", "1", wait_go("go"))
    g.wait_state(blocker, "R")
    mine = g.submit("-g", "1", "true")
    theirs = g.submit("-g", "1", "true", **theirs_kw)
    assert theirs > mine  # submitted later: greedy would start mine first

    # gqueue -f PRIORITY: the effective priority (theirs: unused share, factor 1).
    rows = {int(r["JOBID"]): r for r in
            parse_table(g.run("gqueue", "-u", "all", "-f", "JOBID,USER,PRIORITY",
                              check=True).stdout)}
    assert int(rows[theirs]["PRIORITY"]) > int(rows[mine]["PRIORITY"]), rows
    assert int(rows[theirs]["PRIORITY"]) == 10 + 1000  # 255 x 10/255 + 1000 x 1
    assert rows[blocker]["PRIORITY"] == "10"  # a running job shows its --priority

    # gjob show: the breakdown, as Slurm's sprio.
    show = parse_show(g.run("gjob", "show", theirs, mine, check=True).stdout)
    assert show[0]["EffectivePriority"].startswith("1010.00 = 255 x 0.0392 (priority) + "
                                                   "1000 x 1.0000 (fairshare) + 0 x "), show[0]
    assert "1000 x 0." in show[1]["EffectivePriority"], show[1]  # mine: below 1
    # The API: the effective priority and its parts.
    j = g.job(theirs)
    assert abs(j["effective_priority"] - 1010) < 1e-6
    assert j["priority_detail"]["weights"] == {"priority": 255, "fairshare": 1000, "age": 0,
                                               "max_age_s": 7 * 86400}
    assert j["priority_detail"]["factors"]["fairshare"] == 1
    assert g.job(mine)["priority_detail"]["factors"]["fairshare"] < 1
    assert g.job(blocker)["effective_priority"] is None

    (g.work / "go").touch()
    a, b = g.wait_state(theirs), g.wait_state(mine)
    assert a["state"] == b["state"] == "CD"
    assert a["start_time"] < b["start_time"], (a, b)  # theirs went first

    # gctl usage: both users, my GPU time, the factors.
    users, _ = usage(g)
    assert users[me]["raw_gpu_s"] >= 0.5 and users[me]["fairshare"] < users[them]["fairshare"]
    assert abs(users[me]["raw_gpu_s"] - used_gpu_s(g, me)) < 0.01
    table = parse_table(g.run("gctl", "usage", check=True).stdout)
    assert list(table[0]) == ["TYPE", "NAME", "SHARES", "NORM_SHARES", "RAW_GPU_HOURS",
                              "USAGE_GPU_HOURS", "NORM_USAGE", "FAIRSHARE"]
    assert {(r["TYPE"], r["NAME"]) for r in table} >= {("user", me), ("user", them)}
    # Everyone may look.
    cp = g.run("gctl", "usage", **theirs_kw)
    assert cp.returncode == 0 and me in cp.stdout, cp.stderr


def test_default_weights_keep_priority_then_submission_order(make_gflow):
    g = sim(make_gflow, conf_text="")
    theirs_kw, _ = other_user(g)
    assert g.wait_state(g.submit("-g", "1", "sleep 0.3"))["state"] == "CD"
    blocker = g.submit("-g", "1", wait_go("go"))
    g.wait_state(blocker, "R")
    mine = g.submit("-g", "1", "true")
    theirs = g.submit("-g", "1", "true", **theirs_kw)
    rows = {int(r["JOBID"]): r["PRIORITY"] for r in
            parse_table(g.run("gqueue", "-u", "all", "-f", "JOBID,PRIORITY").stdout)}
    assert rows[mine] == rows[theirs] == "10"  # the effective priority is --priority
    (g.work / "go").touch()
    a, b = g.wait_state(mine), g.wait_state(theirs)
    assert a["start_time"] < b["start_time"]  # submission order, as without fair-share


def test_usage_survives_restarts_without_loss_or_double_count(make_gflow):
    """A job that ended, one that runs across a crash of the daemon and one across a clean
    restart: the user's raw GPU time is exactly what their jobs used, once each."""
    g = sim(make_gflow, gpus=2)
    me = g.job(g.submit("-H", "true"))["user"]
    assert g.wait_state(g.submit("-g", "2", "sleep 0.3"))["state"] == "CD"
    first, _ = usage(g)
    assert abs(first[me]["raw_gpu_s"] - used_gpu_s(g, me)) < 0.01

    running = g.submit("-g", "1", "-P", "vision", wait_go("go"))
    g.wait_state(running, "R")
    wait_for(lambda: usage(g)[0][me]["raw_gpu_s"] > first[me]["raw_gpu_s"] + 0.2,
             "the running job to count as it runs")
    g.kill_daemon()  # a crash: nothing written since the job started
    g.up("-c", g.conf, "--simulate-gpus", 2)
    during, projects = usage(g)
    assert during[me]["raw_gpu_s"] > first[me]["raw_gpu_s"] + 0.2  # still counted
    assert projects["vision"]["raw_gpu_s"] > 0.2
    g.down(check=True)
    g.up("-c", g.conf, "--simulate-gpus", 2)
    (g.work / "go").touch()
    assert g.wait_state(running)["state"] == "CD"
    after, projects = usage(g)
    assert abs(after[me]["raw_gpu_s"] - used_gpu_s(g, me)) < 0.01, (after, used_gpu_s(g, me))
    job = g.job(running)
    assert abs(projects["vision"]["raw_gpu_s"] - (job["end_time"] - job["start_time"])) < 0.01
    g.down(check=True)
    g.up("-c", g.conf, "--simulate-gpus", 2)
    again, _ = usage(g)
    assert abs(again[me]["raw_gpu_s"] - after[me]["raw_gpu_s"]) < 1e-6
    # Decayed usage: a little less than raw (half-life 7 days), never more.
    assert 0 < again[me]["usage_gpu_s"] <= again[me]["raw_gpu_s"]


def test_shares_and_bad_settings(make_gflow):
    g = sim(make_gflow, conf_text=FAIRSHARE_CONF + 'fairshare_user_shares = "alice=3,bob=1"\n'
            'fairshare_project_shares = "vision=2"\n')
    users, projects = usage(g)
    assert users["alice"]["shares"] == 3 and users["bob"]["shares"] == 1
    assert projects["vision"]["shares"] == 2
    assert users["alice"]["fairshare"] == 1  # nothing used yet
    # Reload applies new shares.
    g.conf.write_text(FAIRSHARE_CONF + 'fairshare_user_shares = "alice=1,carol=5"\n')
    g.gflowd("-c", g.conf, "reload", check=True)
    users, _ = usage(g)
    assert users["alice"]["shares"] == 1 and users["carol"]["shares"] == 5
    # Bad shares: refused with the key and the fix, nothing changed.
    g.conf.write_text(FAIRSHARE_CONF + 'fairshare_user_shares = "alice"\n')
    cp = g.gflowd("-c", g.conf, "reload")
    assert cp.returncode != 0
    assert "scheduler.fairshare_user_shares" in cp.stderr and "NAME=N" in cp.stderr, cp.stderr
    assert usage(g)[0]["carol"]["shares"] == 5
    cp = g.run("gctl", "usage", "extra")
    assert_one_line_error(cp, "gctl", 2, "takes no arguments")
    cp = g.run("gctl", "usage", "-o", "yaml")
    assert_one_line_error(cp, "gctl", 2, "-o json")


def test_age_factor_lets_a_long_wait_overtake_a_higher_priority(make_gflow):
    """Weights apply on reload; with an age weight the job that has waited longer goes
    before a later one of higher --priority (by --priority alone it would not)."""
    g = sim(make_gflow, conf_text="")
    blocker = g.submit("-g", "1", wait_go("go"))
    g.wait_state(blocker, "R")
    old = g.submit("-g", "1", "-p", "10", "true")
    submitted = g.job(old)["submit_time"]
    wait_for(lambda: time.time() - submitted > 1.5, "the first job to wait 1.5 s")
    new = g.submit("-g", "1", "-p", "20", "true")
    rows = {int(r["JOBID"]): r["PRIORITY"] for r in
            parse_table(g.run("gqueue", "-f", "JOBID,PRIORITY", check=True).stdout)}
    assert (rows[old], rows[new]) == ("10", "20")  # default weights: --priority

    # 1000 x (1.5 s more wait) / 30 s = 50 more than the newer job's 10 more priority.
    g.conf.write_text('[scheduler]\npriority_weight_age = 1000\npriority_max_age = "30s"\n')
    out = g.gflowd("-c", g.conf, "reload", check=True)
    assert "scheduler.priority_weight_age" in out.stdout + out.stderr, out
    assert g.job(old)["effective_priority"] > g.job(new)["effective_priority"]
    detail = g.job(old)["priority_detail"]
    assert detail["weights"]["age"] == 1000 and detail["weights"]["max_age_s"] == 30
    assert 0 < detail["factors"]["age"] <= 1
    show = parse_show(g.run("gjob", "show", old, check=True).stdout)[0]
    assert "+ 1000 x " in show["EffectivePriority"] and "(age)" in show["EffectivePriority"]
    (g.work / "go").touch()
    a, b = g.wait_state(old), g.wait_state(new)
    assert a["start_time"] < b["start_time"], (a, b)

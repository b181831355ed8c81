"""Bulk cancel, hold and release (POST /v1/jobs/cancel|hold|release, one request and one
transaction for many ids): gcancel and gjob hold/release of ranges through the real
binaries; per-id refusals (unknown, ended, wrong state) reported while the rest go
through; dependents cancelled along; the API's reply and its 400s; the table and queue
consistent afterwards (a daemon restart sees the same states)."""
def held_array(gflow, n):
    first = gflow.submit("-H", "--array", f"1-{n}", "true")
    return first, first + n - 1


def states(gflow, first, last):
    out = gflow.run("gqueue", "-a", "-j", f"{first}-{last}", "-f", "JOBID,ST",
                    check=True).stdout.splitlines()[1:]
    return {int(line.split()[0]): line.split()[1] for line in out}


def test_gcancel_of_a_range_in_one_request(gflow):
    first, last = held_array(gflow, 2000)
    cp = gflow.run("gcancel", "-v", f"{first}-{last}")
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.splitlines()
    assert len(lines) == 2000
    assert lines[0] == f"Job {first} cancelled."
    assert lines[-1] == f"Job {last} cancelled."
    assert set(states(gflow, first, last).values()) == {"CA"}
    # Again: every id has ended; each is refused with its reason, exit status 1.
    cp = gflow.run("gcancel", f"{first}-{first + 2}")
    assert cp.returncode == 1
    assert cp.stderr.count("has already ended (CA)") == 3, cp.stderr
    # The daemon's table agrees after a restart.
    gflow.down()
    gflow.up()
    assert set(states(gflow, first, last).values()) == {"CA"}
    assert gflow.api("GET", "/v1/status").json()["counts"].get("H", 0) == 0


def test_mixed_ids_refusals_and_the_rest(gflow):
    first, last = held_array(gflow, 5)
    done = gflow.submit("true")
    gflow.wait_state(done)
    cp = gflow.run("gcancel", f"{first},{first + 2}", str(done), "987654", f"{last}")
    assert cp.returncode == 1
    assert f"Job {first} cancelled." in cp.stdout
    assert f"Job {first + 2} cancelled." in cp.stdout
    assert f"Job {last} cancelled." in cp.stdout
    assert "987654" in cp.stderr and str(done) in cp.stderr
    st = states(gflow, first, last)
    assert [st[i] for i in range(first, last + 1)] == ["CA", "H", "CA", "H", "CA"]
    assert gflow.job(done)["state"] == "CD"


def test_hold_and_release_of_a_range(gflow):
    first, last = held_array(gflow, 300)
    # Released with a begin time far ahead: queued (PD), not started.
    cp = gflow.run("gjob", "release", "--at", "now+30d", f"{first}-{last}")
    assert cp.returncode == 0, cp.stderr
    assert len(cp.stdout.splitlines()) == 300
    assert set(states(gflow, first, last).values()) == {"PD"}
    cp = gflow.run("gjob", "hold", f"{first}-{last}")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.splitlines()[5] == f"Job {first + 5} put on hold."
    assert set(states(gflow, first, last).values()) == {"H"}
    # A second hold is refused per job (not queued), exit 1.
    cp = gflow.run("gjob", "hold", f"{first}-{first + 1}")
    assert cp.returncode == 1 and cp.stderr.count("only queued (PD) jobs") == 2, cp.stderr
    # Release some to start at once (a new begin time replaces the far one): they run
    # to completion; the held rest stay held.
    cp = gflow.run("gjob", "release", "--at", "now+1s", f"{first}-{first + 9}")
    assert cp.returncode == 0, cp.stderr
    for i in range(first, first + 10):
        assert gflow.wait_state(i)["state"] == "CD"
    st = states(gflow, first, last)
    assert all(st[i] == "H" for i in range(first + 10, last + 1))
    gflow.run("gcancel", f"{first + 10}-{last}", check=True)


def test_dependents_cancelled_along_once(gflow):
    a = gflow.submit("-H", "true")
    b = gflow.submit("-H", "--depends-on", str(a), "true")
    c = gflow.submit("-H", "true")
    cp = gflow.run("gcancel", str(a), str(b), str(c))
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.splitlines() == [
        f"Job {a} cancelled.",
        f"Job {b} cancelled too (depends on {a}: DependencyFailed:{a}).",
        f"Job {c} cancelled.",
    ]
    assert gflow.job(b)["reason"].startswith("DependencyFailed")


def test_bulk_api_reply_and_bad_bodies(gflow):
    first, last = held_array(gflow, 3)
    r = gflow.api("POST", "/v1/jobs/cancel?dry_run=1", {"ids": [first, 987654]})
    assert r.status == 200, r
    res = r.json()["results"]
    # A dry run always says the state (gcancel --dry-run prints it): never the short form.
    assert res[0] == {"id": first, "state": "H", "dependents_cancelled": []}
    assert res[1]["id"] == 987654 and res[1]["status"] == 404 and "error" in res[1]
    assert gflow.job(first)["state"] == "H"
    r = gflow.api("POST", "/v1/jobs/release", {"ids": [first], "begin_time": 4102444800})
    assert r.status == 200 and r.json()["results"] == [first], r
    assert gflow.job(first)["state"] == "PD"
    for path, body in (("/v1/jobs/cancel", {"ids": "1"}), ("/v1/jobs/cancel", {"ids": [0]}),
                       ("/v1/jobs/hold", {"ids": [1], "begin_time": 1}),
                       ("/v1/jobs/release", {"ids": [1], "x": 1}), ("/v1/jobs/cancel", [1])):
        assert gflow.api("POST", path, body).status == 400, (path, body)
    assert gflow.api("GET", "/v1/jobs/cancel").status == 405
    r = gflow.api("POST", "/v1/jobs/hold", {"ids": [first, first + 1]})
    assert r.json()["results"][0] == first and r.json()["results"][1]["status"] == 409, r

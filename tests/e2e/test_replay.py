"""End-to-end tests of gflow-replay (docs/replay.md), the trace replay of the real
scheduling pass in virtual time. It needs no daemon: each test runs the built binary on
a trace written here (or the synthetic one) and checks its output, its exit status and
its one-line errors."""
import csv
import io
import random
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD_DIR, REPO, VERSION, assert_one_line_error

PHILLY = REPO.parent / "shared" / "data" / "traces" / "philly-subset.csv"
CSV_COLUMNS = [
    "policy", "load", "offered_load", "gpus", "jobs", "skipped", "wait_mean_s", "wait_p50_s",
    "wait_p95_s", "wait_p99_s", "big_jobs", "big_wait_mean_s", "big_wait_p50_s",
    "big_wait_p95_s", "big_wait_p99_s", "max_wait_s", "utilisation", "bounded_slowdown",
    "jain", "jain_total", "contended_windows", "users",
]
# Every policy, in the order `--policy all` (the default) replays them.
ALL_POLICIES = ["greedy", "backfill", "backfill-24h", "backfill-outside", "fairshare",
                "backfill+fairshare"]
TEXT_COLUMNS = ["POLICY", "JOBS", "WAIT", "P50", "P95", "P99", "JOBS4+", "WAIT4+", "MAXWAIT",
                "UTIL", "BSLD", "JAIN"]


def replay(*args, timeout=60):
    exe = BUILD_DIR / "gflow-replay"
    if not exe.exists():
        pytest.fail(f"{exe} is missing; build with 'meson setup build && ninja -C build'")
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def csv_rows(r):
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert rows and list(rows[0].keys()) == CSV_COLUMNS
    return rows


@pytest.fixture
def trace(tmp_path):
    """A generated trace of 300 jobs by 3 users on up to 8 GPUs, plus 7 jobs of 12 GPUs
    (too many for the machine)."""
    rnd = random.Random(42)
    lines = ["submit_s,gpus,runtime_s,time_limit_s,user,project"]
    t = 0
    for i in range(300):
        t += rnd.randint(0, 600)
        gpus = rnd.choice([1, 1, 1, 2, 4, 8])
        limit = "" if i % 3 else rnd.randint(60, 7200)
        lines.append(f"{t},{gpus},{rnd.randint(10, 7200)},{limit},u{i % 3},p{i % 2}")
    for i in range(7):
        lines.append(f"{t + i},12,100,,u0,p0")
    path = tmp_path / "trace.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_text_table_on_a_generated_trace(trace):
    r = replay(trace)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"trace: {trace}, 307 jobs, load x1 (offered load ")
    assert lines[0].endswith("; machine: 8 GPUs")
    assert lines[1] == "skipped: 7 jobs ask for more than 8 GPUs (not replayed)"
    assert lines[2].replace("|", " ").split()[:8] == TEXT_COLUMNS[:8]
    for col in TEXT_COLUMNS:
        assert col in lines[2]
    rows = [ln.replace("|", " ").split() for ln in lines[3:]]
    assert [row[0] for row in rows] == ALL_POLICIES  # every policy by default
    assert all(row[1] == "300" for row in rows)
    assert "greedy: 300 jobs" in r.stderr and "backfill: 300 jobs" in r.stderr
    assert "replayed in" in r.stderr


def test_csv_table(trace):
    rows = csv_rows(replay(trace, "--csv"))
    assert [row["policy"] for row in rows] == ALL_POLICIES
    row = rows[0]
    assert row["policy"] == "greedy" and row["load"] == "1" and row["gpus"] == "8"
    assert row["jobs"] == "300" and row["skipped"] == "7" and row["users"] == "3"
    assert 0 < float(row["utilisation"]) <= 1
    assert 0 < float(row["jain"]) <= 1 and 0 < float(row["jain_total"]) <= 1
    assert int(row["contended_windows"]) > 0
    assert float(row["bounded_slowdown"]) >= 1
    assert float(row["wait_p50_s"]) <= float(row["wait_p95_s"]) <= float(row["wait_p99_s"])
    assert float(row["wait_p99_s"]) <= float(row["max_wait_s"])
    assert int(row["big_jobs"]) > 0


def test_hand_computed_trace(tmp_path):
    """2 GPUs: A takes both for 100 s; B (50 s) and C (30 s, limit 20 s) wait for it: waits
    0, 90, 80; 270 GPU-seconds over 2 GPUs x 150 s."""
    path = tmp_path / "t.csv"
    path.write_text("submit_s,gpus,runtime_s,time_limit_s,user,project\n"
                    "0,2,100,,alice,p\n10,1,50,,bob,p\n20,1,30,20,bob,q\n")
    row = csv_rows(replay(path, "--gpus", 2, "--csv", "--policy", "greedy"))[0]
    assert float(row["wait_mean_s"]) == pytest.approx(170 / 3)
    assert (row["wait_p50_s"], row["wait_p95_s"], row["wait_p99_s"]) == ("80", "90", "90")
    assert row["max_wait_s"] == "90"
    assert row["big_jobs"] == "0" and row["big_wait_mean_s"] == "" and row["big_wait_p99_s"] == ""
    assert float(row["utilisation"]) == pytest.approx(0.9)
    assert float(row["bounded_slowdown"]) == pytest.approx((1 + 2.8 + 5) / 3)
    assert float(row["jain"]) == pytest.approx(270 ** 2 / (2 * (200 ** 2 + 70 ** 2)))
    assert row["jain_total"] == row["jain"] and row["contended_windows"] == "1"


def test_cdf_file(trace, tmp_path):
    out = tmp_path / "cdf.dat"
    r = replay(trace, "--cdf", out, "--policy", "all")
    assert r.returncode == 0, r.stderr
    blocks = [b for b in out.read_text().split("\n\n\n") if b.strip()]
    assert len(blocks) == len(ALL_POLICIES)  # one per policy
    assert blocks[1].strip().startswith("# policy backfill:")
    lines = blocks[0].strip().splitlines()
    assert lines[0].startswith("# policy greedy:")
    points = [tuple(map(float, ln.split())) for ln in lines[1:]]
    assert len(points) == 300
    assert points[-1][1] == 1.0
    assert all(a[0] <= b[0] and a[1] < b[1] for a, b in zip(points, points[1:]))


def test_synthetic_is_seeded_and_load_compresses():
    a = csv_rows(replay("--synthetic", 3000, "--seed", 3, "--csv"))[0]
    b = csv_rows(replay("--synthetic", 3000, "--seed", 3, "--csv"))[0]
    c = csv_rows(replay("--synthetic", 3000, "--seed", 4, "--csv"))[0]
    assert a == b and a != c
    assert a["jobs"] == "3000" and a["users"] == "5" and a["skipped"] == "0"
    assert float(a["offered_load"]) == pytest.approx(0.7, abs=0.01)
    d = csv_rows(replay("--synthetic", 3000, "--seed", 3, "--load", 2, "--csv"))[0]
    assert d["load"] == "2"
    assert float(d["offered_load"]) == pytest.approx(1.4, abs=0.02)
    # Denser arrivals on the same machine: longer waits.
    assert float(d["wait_mean_s"]) > float(a["wait_mean_s"])
    # Fewer GPUs: the 8-GPU jobs are skipped and counted.
    e = csv_rows(replay("--synthetic", 3000, "--seed", 3, "--gpus", 4, "--csv"))[0]
    assert int(e["skipped"]) > 0 and int(e["jobs"]) + int(e["skipped"]) == 3000


def test_every_job_too_big(tmp_path):
    """Nothing can run: every job is counted as skipped and the figures are empty."""
    path = tmp_path / "big.csv"
    path.write_text("submit_s,gpus,runtime_s,user\n0,16,10,a\n5,9,10,b\n")
    row = csv_rows(replay(path, "--csv"))[0]
    assert row["jobs"] == "0" and row["skipped"] == "2" and row["users"] == "0"
    assert row["wait_mean_s"] == row["jain"] == row["jain_total"] == row["bounded_slowdown"] == ""
    r = replay(path)
    assert r.returncode == 0
    assert "skipped: 2 jobs ask for more than 8 GPUs (not replayed)" in r.stdout


def test_100k_jobs():
    """100,000 jobs are all replayed (how long that takes is make bench's, goal < 10 s)."""
    row = csv_rows(replay("--synthetic", 100000, "--csv", timeout=300))[0]
    assert row["jobs"] == "100000"


@pytest.mark.skipif(not PHILLY.exists(), reason="no ../shared/data/traces/philly-subset.csv")
def test_philly_subset_by_header_names():
    """The Philly subset's header (job,submit_s,gpus,runtime_s,attempts) is read by name;
    its jobs of more than 8 GPUs are skipped."""
    rows = csv_rows(replay(PHILLY, "--csv", "--load", 0.01))
    assert rows[0]["jobs"] == "2811" and rows[0]["skipped"] == "223"
    # No users in the trace: one user, so no window where users compete.
    assert rows[0]["users"] == "1" and rows[0]["jain_total"] == "1"
    assert rows[0]["jain"] == "" and rows[0]["contended_windows"] == "0"


def test_bad_trace_input(tmp_path):
    missing = tmp_path / "missing.csv"
    missing.write_text("submit_s,runtime_s\n0,10\n")
    assert_one_line_error(replay(missing), "gflow-replay", 2, "no column gpus",
                          "submit_s, gpus and runtime_s")
    negative = tmp_path / "negative.csv"
    negative.write_text("submit_s,gpus,runtime_s\n0,1,10\n5,-2,10\n")
    assert_one_line_error(replay(negative), "gflow-replay", 2, f"{negative}:3: gpus is '-2'",
                          "whole number of GPUs >= 0")
    assert_one_line_error(replay(tmp_path / "nope.csv"), "gflow-replay", 2,
                          f"cannot read {tmp_path / 'nope.csv'}: No such file or directory")
    unreadable = tmp_path / "dir.csv"
    unreadable.mkdir()
    assert_one_line_error(replay(unreadable), "gflow-replay", 2, f"cannot read {unreadable}")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert_one_line_error(replay(empty), "gflow-replay", 2, "empty", "header line")


@pytest.mark.parametrize("args, needles", [
    (["--synthetic", 10, "--gpus", 0], ["--gpus '0'", "1 to 64"]),
    (["--synthetic", 10, "--gpus", 65], ["--gpus '65'"]),
    (["--synthetic", 10, "--load", 0], ["--load '0'", "> 0"]),
    (["--synthetic", 10, "--load", "x"], ["--load 'x'"]),
    (["--synthetic", 10, "--policy", "fifo"], ["no policy 'fifo'", "greedy", "all"]),
    (["--synthetic", 0], ["--synthetic '0'"]),
    (["--synthetic", 10, "a.csv"], ["not both"]),
    ([], ["no trace", "--synthetic N"]),
    (["a.csv", "b.csv"], ["one trace at most"]),
    (["--bogus"], ["unknown option --bogus"]),
    (["--synthetic", 10, "--time-limits", "some"], ["--time-limits 'some'", "exact"]),
    (["--synthetic"], ["--synthetic needs a value"]),
])
def test_bad_options(args, needles):
    assert_one_line_error(replay(*args), "gflow-replay", 2, *needles)


def test_cdf_unwritable(tmp_path):
    assert_one_line_error(replay("--synthetic", 10, "--cdf", tmp_path / "no" / "c.dat"),
                          "gflow-replay", 2, "--cdf: cannot write")


def test_help_and_version():
    r = replay("--help")
    assert r.returncode == 0 and r.stderr == ""
    for word in ["--gpus", "--policy", "--synthetic", "--seed", "--load", "--csv", "--cdf",
                 "submit_s", "time_limit_s", "greedy", "all"]:
        assert word in r.stdout
    r = replay("--version")
    assert r.returncode == 0 and r.stdout == f"gflow-replay {VERSION}\n"


def test_backfill_bounds_the_wait_of_a_job_greedy_starves(tmp_path):
    """2 GPUs: a 1-GPU job runs, a 2-GPU job comes, then a 1-GPU job every 10 s (all with
    time limits). Greedy hands each freed GPU to the stream, so the 2-GPU job waits until
    the stream ends; backfill reserves both GPUs for it from the first job's limit."""
    lines = ["submit_s,gpus,runtime_s,time_limit_s,user,project",
             "0,1,100,110,a,p", "1,2,10,20,b,p"]
    lines += [f"{t},1,50,60,c,p" for t in range(2, 400, 10)]
    path = tmp_path / "stream.csv"
    path.write_text("\n".join(lines) + "\n")
    rows = {row["policy"]: row for row in csv_rows(replay(path, "--gpus", 2, "--csv"))}
    greedy, backfill = float(rows["greedy"]["max_wait_s"]), float(rows["backfill"]["max_wait_s"])
    assert greedy > 1000  # the 2-GPU job waits behind the whole stream
    assert backfill < 700, rows["backfill"]
    # Without time limits every job is planned as 24 h (backfill-24h, backfill-outside;
    # backfill until 20 jobs have ended, then at the p95 of their run times): no stream
    # job may be backfilled into the 2-GPU job's GPUs for long (under either rule for
    # untimed jobs): the 2-GPU job still starts soon after the first job ends.
    rows = {row["policy"]: row for row in
            csv_rows(replay(path, "--gpus", 2, "--csv", "--time-limits", "none"))}
    assert float(rows["backfill"]["max_wait_s"]) < 700
    assert float(rows["backfill-24h"]["max_wait_s"]) < 700
    assert float(rows["backfill-outside"]["max_wait_s"]) < 700
    # With exact limits greedy is unchanged (it never reads them).
    exact = csv_rows(replay(path, "--gpus", 2, "--csv", "--policy", "greedy",
                            "--time-limits", "exact"))[0]
    assert float(exact["max_wait_s"]) == greedy


# ---- fair-share (issue 12): the policies charge users' GPU time in virtual time ----

def test_fairshare_raises_jain_under_contention():
    """At twice the synthetic trace's load the queue is long enough for the order to
    matter: fair-share gives users' GPU time more evenly per hour than greedy, and
    backfill+fairshare more evenly than backfill."""
    rows = {row["policy"]: row for row in
            csv_rows(replay("--synthetic", 10000, "--load", 2, "--csv", "--policy",
                            "greedy,fairshare,backfill,backfill+fairshare"))}
    assert float(rows["fairshare"]["jain"]) > float(rows["greedy"]["jain"]) + 0.03, rows
    assert float(rows["backfill+fairshare"]["jain"]) > float(rows["backfill"]["jain"]) + 0.03
    # every job still runs, and the machine stays as busy as under greedy
    assert all(row["jobs"] == "10000" for row in rows.values())
    assert abs(float(rows["fairshare"]["utilisation"]) -
               float(rows["greedy"]["utilisation"])) < 0.03


def test_fairshare_half_life_option():
    a = csv_rows(replay("--synthetic", 5000, "--load", 2, "--csv", "--policy", "fairshare"))[0]
    b = csv_rows(replay("--synthetic", 5000, "--load", 2, "--csv", "--policy", "fairshare",
                        "--half-life", "7d"))[0]
    assert a["jain"] != b["jain"]  # the half-life changes the order
    g = csv_rows(replay("--synthetic", 5000, "--csv", "--policy", "greedy",
                        "--half-life", "7d"))[0]
    assert g == csv_rows(replay("--synthetic", 5000, "--csv", "--policy", "greedy"))[0]
    r = replay("--synthetic", 10, "--half-life", "soon")
    assert_one_line_error(r, "gflow-replay", 2, "--half-life 'soon'", "1h")

"""Issue 29, "timezone", "Reservation times", "One time style everywhere": the top-level
`timezone` key (an IANA zone, checked; the commands read it from the config file they
use, --config FILE or the default one, with GFLOW_TIMEZONE over it) changes the times
printed and how times without an offset are read; times with Z or an offset are read as
such everywhere (gbatch --begin, gqueue --since, gctl reserve --start/--from/--to);
`gctl reserve create/list/get --timezone`; `gctl reserve list --timeline` with
--range/--from/--to; and one style: moments "YYYY-MM-DD HH:MM:SS", durations "HH:MM:SS".
On the NVML simulator; every wait polls with a deadline."""
import calendar
import re

import pytest

from conftest import assert_one_line_error, parse_table, wait_for

MOMENT = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
DURATION = r"\d\d+:\d\d:\d\d"

# 2031-01-01 00:00:00 UTC: 08:00 in Shanghai (no DST there), 19:00 the day before in
# New York (EST, -05:00).
T0 = calendar.timegm((2031, 1, 1, 0, 0, 0))


def write_config(g, text, name="gflow.toml"):
    path = g.root / name
    path.write_text(text)
    return path


def daemon(make_gflow, zone="Asia/Shanghai", gpus=4, env=None):
    """A daemon on simulated GPUs whose config file sets timezone = zone; g.conf is it."""
    g = make_gflow(start=False, env=env)
    g.conf = write_config(g, f'timezone = "{zone}"\n\n[daemon]\nmax_running_jobs = 8\n')
    g.up("-c", g.conf, "--simulate-gpus", gpus)
    return g


def submit_held(g, begin, *extra, env=None):
    cp = g.run("gbatch", *extra, "-H", "--begin", begin, "true", env=env, check=True)
    return int(re.search(r"Submitted batch job (\d+)", cp.stdout).group(1)), cp


def gqueue_cell(g, job, field, *extra, env=None):
    cp = g.run("gqueue", *extra, "-j", job, "-f", f"JOBID,{field}", env=env, check=True)
    rows = parse_table(cp.stdout)
    assert len(rows) == 1, cp.stdout
    return rows[0][field]


# ---------------------------------------------------------------- timezone from config

def test_config_timezone_changes_printed_times(make_gflow):
    g = daemon(make_gflow)
    job, cp = submit_held(g, "2031-01-01T00:00:00Z", "--config", g.conf)
    assert g.job(job)["begin_time"] == T0
    # gbatch echoes the begin time in the config's zone, in the one style.
    assert "Begins at 2031-01-01 08:00:00\n" in cp.stdout, cp.stdout
    # The same moment through gqueue, in the config's zone, then overridden by the
    # environment (GFLOW_TIMEZONE, as gflow reads its environment).
    assert gqueue_cell(g, job, "BEGIN", "--config", g.conf) == "2031-01-01 08:00:00"
    assert gqueue_cell(g, job, "BEGIN", "--config", g.conf,
                       env={"GFLOW_TIMEZONE": "America/New_York"}) == "2030-12-31 19:00:00"
    assert gqueue_cell(g, job, "BEGIN", env={"GFLOW_TIMEZONE": "UTC"}) == "2031-01-01 00:00:00"
    # gjob show (whatever its layout) shows it the same way.
    show = g.run("gjob", "--config", g.conf, "show", job, check=True).stdout
    assert "2031-01-01 08:00:00" in show, show
    assert "T08:00" not in show, show


def test_naive_times_are_read_in_the_config_zone(make_gflow):
    g = daemon(make_gflow)
    # 08:00 without an offset, in Shanghai: 00:00 UTC.
    job, _ = submit_held(g, "2031-01-01 08:00", "--config", g.conf)
    assert g.job(job)["begin_time"] == T0
    job2, _ = submit_held(g, "2031-01-01T08:00:00", env={"GFLOW_TIMEZONE": "Asia/Shanghai"})
    assert g.job(job2)["begin_time"] == T0
    # gqueue --since: a naive date is midnight in the config's zone (16:00 UTC the day
    # before): both jobs were submitted after it, none after a date in the future.
    ids = lambda *a: {r["JOBID"] for r in parse_table(
        g.run("gqueue", "--config", g.conf, "-a", "-f", "JOBID", *a, check=True).stdout)}
    assert ids("--since", "2020-01-01") == {str(job), str(job2)}
    assert ids("--since", "2099-01-01") == set()


def test_default_config_file_is_read_and_local_time_without_one(make_gflow):
    """Without --config the command reads the default file (root: /etc/gflow/gflow.toml,
    others: $XDG_CONFIG_HOME/gflow/gflow.toml); here neither sets a zone for root, so TZ
    (local time) applies."""
    g = daemon(make_gflow)
    job, _ = submit_held(g, "2031-01-01T00:00:00Z")
    assert gqueue_cell(g, job, "BEGIN", env={"TZ": "UTC"}) == "2031-01-01 00:00:00"
    assert gqueue_cell(g, job, "BEGIN", env={"TZ": "Asia/Tokyo"}) == "2031-01-01 09:00:00"


# ---------------------------------------------------------------- Z and offsets

@pytest.mark.parametrize("when", ["2031-01-01T00:00:00Z", "2031-01-01T08:00:00+08:00",
                                  "2031-01-01 08:00+0800", "2030-12-31T19:00:00-05:00",
                                  "2030-12-31 19:00 -0500", "2031-01-01T00:00:00.250Z",
                                  "2031-01-01T09:00:00+09"])
def test_offsets_accepted_by_begin(make_gflow, when):
    g = daemon(make_gflow, zone="America/Los_Angeles")
    job, _ = submit_held(g, when, "--config", g.conf)
    assert g.job(job)["begin_time"] == T0, when


def test_offsets_in_since(make_gflow):
    g = daemon(make_gflow)
    job, _ = submit_held(g, "now+1h")
    cell = lambda since: [r["JOBID"] for r in parse_table(
        g.run("gqueue", "-a", "-f", "JOBID", "--since", since, check=True).stdout)]
    assert cell("2020-01-01T00:00:00Z") == [str(job)]
    assert cell("2020-01-01T00:00:00+08:00") == [str(job)]
    assert cell("2099-01-01T00:00:00-0500") == []


def test_bad_times_refused(make_gflow):
    g = daemon(make_gflow)
    for bad in ("2031-01-01T08:00+8:00", "2031-01-01T08:00+25:00", "2031-01-01T08:00Zulu",
                "2031-02-30T08:00Z"):
        cp = g.run("gbatch", "--begin", bad, "true")
        assert_one_line_error(cp, "gbatch", 2, bad, "+08:00")


def test_reserve_start_with_z_offset_and_timezone(make_gflow):
    g = daemon(make_gflow)
    start = calendar.timegm((2031, 1, 1, 2, 0, 0))
    for args in (["--start", "2031-01-01T02:00:00Z"],
                 ["--start", "2031-01-01T10:00:00+08:00"],
                 ["--start", "2031-01-01 02:00:00-0000"],
                 ["--start", "2031-01-01 10:00", "CONFIG"],  # the config's zone
                 ["--start", "2030-12-31 21:00", "--timezone", "America/New_York"],
                 ["--start", "2031-01-01 02:00", "--timezone", "UTC"]):
        conf = ["--config", g.conf] if "CONFIG" in args else []
        cp = g.run("gctl", *conf, "reserve", "create", "--gpu-spec", "0", "--duration", "1h",
                   *[a for a in args if a != "CONFIG"])
        assert cp.returncode == 0, (args, cp.stderr)
        rid = int(re.search(r"ReservationID: (\d+)", cp.stdout).group(1))
        got = g.api("GET", f"/v1/reservations/{rid}").json()
        assert got["start"] == start, (args, got)
        g.run("gctl", "reserve", "cancel", rid, check=True)
    # --timezone also shows the times: details carry the zone's name, as gflow's.
    cp = g.run("gctl", "reserve", "create", "--gpu-spec", "1", "--duration", "90m",
               "--start", "2031-01-01T02:00:00Z", "--timezone", "Asia/Shanghai", check=True)
    assert "StartTime: 2031-01-01 10:00:00 CST\n" in cp.stdout, cp.stdout
    assert "EndTime: 2031-01-01 11:30:00 CST\n" in cp.stdout, cp.stdout
    assert "Duration: 01:30:00\n" in cp.stdout, cp.stdout
    rid = re.search(r"ReservationID: (\d+)", cp.stdout).group(1)
    cp = g.run("gctl", "reserve", "get", rid, "--timezone", "UTC", check=True)
    assert "StartTime: 2031-01-01 02:00:00 UTC\n" in cp.stdout, cp.stdout
    cp = g.run("gctl", "--config", g.conf, "reserve", "list", check=True)
    row = [r for r in parse_table(cp.stdout) if r["ID"] == rid][0]
    assert (row["START"], row["END"], row["STATUS"]) == ("2031-01-01 10:00:00",
                                                         "2031-01-01 11:30:00", "Pending"), row


# ---------------------------------------------------------------- invalid zones

def test_invalid_zone_in_config_refused_by_daemon(make_gflow):
    g = make_gflow(start=False)
    conf = write_config(g, 'timezone = "Mars/Olympus"\n')
    cp = g.gflowd("-c", conf, "up", "--simulate-gpus", 1)
    assert cp.returncode != 0, cp
    err = cp.stderr + cp.stdout
    assert "timezone" in err and "unknown time zone 'Mars/Olympus'" in err, err
    assert "Asia/Shanghai" in err, err  # says what a good one looks like
    conf = write_config(g, 'timezone = 8\n', "num.toml")
    cp = g.gflowd("-c", conf, "up", "--simulate-gpus", 1)
    assert cp.returncode != 0 and "timezone must be a string" in cp.stderr + cp.stdout, cp


def test_invalid_zone_refused_by_commands(make_gflow):
    g = daemon(make_gflow)
    job, _ = submit_held(g, "now+1h")
    cp = g.run("gqueue", "-j", job, "-f", "JOBID,SUBMIT", env={"GFLOW_TIMEZONE": "Nowhere/City"})
    assert_one_line_error(cp, "gqueue", 1, "GFLOW_TIMEZONE", "unknown time zone 'Nowhere/City'")
    bad = write_config(g, 'timezone = "../../etc/passwd"\n', "bad.toml")
    cp = g.run("gqueue", "--config", bad, "-j", job, "-f", "JOBID,SUBMIT")
    assert_one_line_error(cp, "gqueue", 1, "bad.toml:1", "unknown time zone")
    # A command that shows no time never reads the zone: it still works.
    cp = g.run("gqueue", "-j", job, "-f", "JOBID", env={"GFLOW_TIMEZONE": "Nowhere/City"})
    assert cp.returncode == 0, cp
    for args in (["create", "--gpus", "1", "--start", "now+1h", "--duration", "1h"],
                 ["list"], ["list", "--timeline"]):
        cp = g.run("gctl", "reserve", *args, "--timezone", "Moon/Base")
        assert_one_line_error(cp, "gctl", 2, "--timezone", "unknown time zone 'Moon/Base'")


# ---------------------------------------------------------------- the timeline

def timeline(g, *args, **kw):
    return g.run("gctl", "--config", g.conf, "reserve", "list", "--timeline", *args, **kw)


def test_timeline_shape(make_gflow):
    g = daemon(make_gflow, zone="UTC")
    # Two reservations in a fixed window: GPUs 2,3 from 04:00 to 08:00, GPU 0 from
    # 10:00 to 12:00; one cancelled on GPU 1.
    day = "2031-01-01T"
    for spec, start, dur in (("2,3", "04:00", "4h"), ("0", "10:00", "2h"), ("1", "06:00", "1h")):
        g.run("gctl", "reserve", "create", "--gpu-spec", spec, "--start", f"{day}{start}:00Z",
              "--duration", dur, check=True)
    g.run("gctl", "reserve", "cancel", "3", check=True)
    cp = timeline(g, "--from", f"{day}00:00:00Z", "--to", f"{day}16:00:00Z", check=True)
    lines = cp.stdout.splitlines()
    assert lines[0] == "" and lines[1].startswith("GPU Reservations Timeline ("), lines[:2]
    assert re.fullmatch(rf"GPU Reservations Timeline \({MOMENT} UTC\)", lines[1]), lines[1]
    assert lines[2] == "═" * 80
    axis, labels = lines[3], lines[4]
    assert axis.startswith(" " * 8 + "┬") and set(axis.strip()) <= {"┬", "─"}, axis
    assert len(axis) == 80, axis
    assert labels.startswith(" " * 8 + "01/01 00:00"), labels
    rows = {l.split("  ")[0].strip(): l for l in lines if l.startswith("GPU ")
            and not l.startswith("GPU Reservations")}
    assert set(rows) == {"GPU 0", "GPU 1", "GPU 2", "GPU 3"}, rows
    plot = {k: v[8:] for k, v in rows.items()}
    # 16 hours over 72 columns: 04:00 is column 18, 08:00 column 36, 10:00 column 45.
    assert plot["GPU 2"].startswith(" " * 18 + "#1░"), plot["GPU 2"]
    assert plot["GPU 2"].rstrip().endswith("░") and len(plot["GPU 2"].rstrip()) == 36
    assert plot["GPU 3"] == plot["GPU 2"]
    assert plot["GPU 0"].startswith(" " * 45 + "#2░") and len(plot["GPU 0"]) == 54, plot["GPU 0"]
    assert "▒" in plot["GPU 1"], plot["GPU 1"]  # the cancelled one
    rule = lines.index("─" * 80)
    listed = lines[rule + 1:rule + 4]
    assert [l.split()[0] for l in listed] == ["#1", "#3", "#2"], listed  # by start
    assert "GPU 2,3" in listed[0] and "Pending" in listed[0], listed[0]
    assert "01/01 04:00 → 01/01 08:00" in listed[0], listed[0]
    assert "Cancelled" in listed[1], listed[1]
    assert "Summary: 0 active, 2 pending | 0 GPUs currently reserved" in cp.stdout, cp.stdout
    assert lines[-1].startswith("Legend: █ Active  ░ Pending"), lines[-1]
    # In another zone the same picture is drawn against other hours.
    cp = timeline(g, "--from", f"{day}08:00:00+08:00", "--to", f"{day}16:00:00Z",
                  "--timezone", "Asia/Shanghai", check=True)
    assert re.search(rf"Timeline \({MOMENT} CST\)", cp.stdout), cp.stdout
    assert "01/01 08:00" in cp.stdout.splitlines()[4], cp.stdout
    assert "01/01 12:00 → 01/01 16:00" in cp.stdout, cp.stdout


def test_timeline_now_and_range(make_gflow):
    g = daemon(make_gflow, zone="UTC")
    g.run("gctl", "reserve", "create", "--gpus", "1", "--start", "now", "--duration", "2h",
          check=True)
    g.run("gctl", "reserve", "create", "--gpu-spec", "0", "--start", "now+30h", "--duration",
          "1h", check=True)
    # The active one shows once the daemon has started it.
    wait_for(lambda: "Active" in g.run("gctl", "reserve", "list").stdout, "an active reservation")
    cp = timeline(g, check=True)  # now-12h .. now+12h
    assert "┃" in cp.stdout.splitlines()[3] and "Now" in cp.stdout.splitlines()[4], cp.stdout
    assert "█" in cp.stdout and "1 active, 1 pending | 1 GPU currently reserved" in cp.stdout
    assert "(1 more outside this range" in cp.stdout, cp.stdout
    for spec in ("48h", "-1h:+2d", "+36h", "1d12h"):
        cp = timeline(g, "--range", spec, check=True)
        assert "(1 more outside" not in cp.stdout, (spec, cp.stdout)
    cp = timeline(g, "--range", "-24h", check=True)
    assert cp.stdout.splitlines()[3].endswith("┃"), cp.stdout  # now is the end
    assert "(1 more outside" in cp.stdout, cp.stdout


@pytest.mark.parametrize("args,needle", [
    (["--range", "48h", "--from", "now", "--to", "now+1h"], "--range cannot be combined"),
    (["--from", "2031-01-01T00:00Z"], "--from and --to must be used together"),
    (["--to", "2031-01-01T00:00Z"], "--from and --to must be used together"),
    (["--range", "4x"], "invalid --range '4x'"),
    (["--range", "-2h:-3h"], "the end must be after the start"),
    (["--from", "2031-01-02T00:00Z", "--to", "2031-01-01T00:00Z"], "--to must be after --from"),
    (["--from", "yesterday", "--to", "now"], "invalid --from 'yesterday'"),
])
def test_timeline_errors(make_gflow, args, needle):
    g = daemon(make_gflow, gpus=1)
    cp = g.run("gctl", "reserve", "list", "--timeline", *args)
    assert_one_line_error(cp, "gctl", 2, needle)


def test_range_needs_timeline(make_gflow):
    g = daemon(make_gflow, gpus=1)
    for args in (["--range", "48h"], ["--from", "now", "--to", "now+1h"]):
        cp = g.run("gctl", "reserve", "list", *args)
        assert_one_line_error(cp, "gctl", 2, "--range/--from/--to can only be used with --timeline")


# ---------------------------------------------------------------- one style

def test_one_style_everywhere(make_gflow):
    g = daemon(make_gflow, zone="UTC")
    job = g.submit("true")
    g.wait_state(job, "CD")
    rows = parse_table(g.run("gqueue", "-j", job, "-f", "JOBID,SUBMIT,START,END,TIME",
                             check=True).stdout)
    for key in ("SUBMIT", "START", "END"):
        assert re.fullmatch(MOMENT, rows[0][key]), rows
    assert re.fullmatch(DURATION, rows[0]["TIME"]) and rows[0]["TIME"].startswith("00:00:"), rows
    show = g.run("gjob", "show", job, check=True).stdout
    assert re.search(MOMENT, show) and not re.search(r"\d\dT\d\d:", show), show
    assert not re.search(r"\b0:0\d\b", show), show  # no Slurm-style "0:02"
    # gjob release --at and gbatch's echo, the same way.
    held, cp = submit_held(g, "2031-01-01T00:00:00Z")
    assert "Begins at 2031-01-01 00:00:00\n" in cp.stdout, cp.stdout
    cp = g.run("gjob", "release", held, "--at", "2031-01-01T01:00:00+01:00", check=True)
    assert "to start at 2031-01-01 00:00:00." in cp.stdout, cp.stdout
    # gflowd status: the uptime as a duration.
    st = g.gflowd("status", check=True).stdout
    assert re.search(rf"^Uptime: {DURATION}$", st, re.M), st
    # gstats' durations and period.
    stats = g.run("gstats", "-a", check=True).stdout
    assert not re.search(r"\d\d\d\d-\d\d-\d\dT", stats), stats


def test_duration_has_no_days_form(make_gflow):
    g = daemon(make_gflow, zone="UTC")
    job = g.submit("-H", "-t", "2-01:00:00", "true")
    assert gqueue_cell(g, job, "TIMELIMIT") == "49:00:00"


# ---------------------------------------------------------------- init and reload

def test_init_writes_the_key_and_reload_takes_a_new_zone(make_gflow):
    g = make_gflow(start=False)
    conf = g.root / "init.toml"
    g.gflowd("-c", conf, "init", check=True)
    text = conf.read_text()
    # A top-level key: before the first section, commented out like every key.
    assert "# timezone =\n" in text and text.index("# timezone =") < text.index("[daemon]")
    conf.write_text(text.replace("# timezone =\n", 'timezone = "Asia/Shanghai"\n'))
    g.up("-c", conf, "--simulate-gpus", 1)
    job, _ = submit_held(g, "2031-01-01T00:00:00Z")
    assert gqueue_cell(g, job, "BEGIN", "--config", conf) == "2031-01-01 08:00:00"
    conf.write_text(conf.read_text().replace("Asia/Shanghai", "Europe/London"))
    cp = g.gflowd("-c", conf, "reload", check=True)
    assert "Applied now: timezone" in cp.stdout, cp.stdout
    assert gqueue_cell(g, job, "BEGIN", "--config", conf) == "2031-01-01 00:00:00"
    # A bad zone is refused by reload too, with nothing changed.
    conf.write_text(conf.read_text().replace("Europe/London", "Europe/Atlantis"))
    cp = g.gflowd("-c", conf, "reload")
    assert_one_line_error(cp, "gflowd", 1, "unknown time zone 'Europe/Atlantis'",
                          "nothing was reloaded")

#!/usr/bin/env python3
"""Runs the toml-test conformance cases (TOML 1.0.0) against a decoder.

usage: run_toml_test.py DECODER

The decoder reads TOML on stdin and prints tagged JSON on stdout (see the README in
the data folder). Every case in files-toml-1.0.0 is run: valid/ cases must be accepted
and match their .json by meaning (numbers numerically, inf/nan as written, date-times
as RFC 3339 instants); invalid/ cases must be rejected with a non-zero exit status.

The cases live in <repo root>/../shared/data/toml-test, or in $TOML_TEST_DIR.
Prints the failures, then "N passed, M failed" on the last line; exits 1 on failure
and 77 (skipped) when the cases are not there.
"""
import json
import math
import os
import re
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

TIMEOUT_S = 10

DATETIME_RE = re.compile(
    r"^(?:(\d{4})-(\d{2})-(\d{2}))?"        # date
    r"[Tt ]?"                               # separator
    r"(?:(\d{2}):(\d{2})(?::(\d{2}))?(?:\.(\d+))?)?"  # time
    r"([Zz]|[+-]\d{2}:\d{2})?$")            # offset


def data_dir():
    env = os.environ.get("TOML_TEST_DIR")
    if env:
        return Path(env)
    repo_root = Path(__file__).resolve().parents[2]
    return repo_root.parent / "shared" / "data" / "toml-test"


def is_tagged(obj):
    return (isinstance(obj, dict) and set(obj) == {"type", "value"}
            and isinstance(obj["type"], str) and isinstance(obj["value"], str))


def parse_float(text):
    t = text.lstrip("+")
    if t in ("nan", "-nan"):
        return "nan"
    if t in ("inf", "-inf"):
        return t
    return float(text.replace("_", ""))


def parse_datetime(kind, text):
    """A comparable key: an aware instant for offset date-times, a tuple otherwise."""
    m = DATETIME_RE.match(text)
    if not m:
        raise ValueError("malformed %s %r" % (kind, text))
    y, mo, d, h, mi, s, frac, off = m.groups()
    nanos = int((frac or "0")[:9].ljust(9, "0"))
    date = (int(y), int(mo), int(d)) if y else None
    time = (int(h), int(mi), int(s or 0), nanos) if h else None
    if kind != "datetime":
        return (date, time)
    if off is None:
        raise ValueError("datetime %r has no offset" % text)
    if off in ("Z", "z"):
        tz = timezone.utc
    else:
        sign = -1 if off[0] == "-" else 1
        tz = timezone(sign * timedelta(hours=int(off[1:3]), minutes=int(off[4:6])))
    second = min(time[2], 59)  # a leap second: compare as :59 plus one second
    instant = datetime(*date, time[0], time[1], second, tzinfo=tz)
    instant += timedelta(seconds=time[2] - second)
    return (instant.astimezone(timezone.utc).replace(tzinfo=None), nanos)


def scalar_key(tagged):
    kind, text = tagged["type"], tagged["value"]
    if kind == "integer":
        return int(text)
    if kind == "float":
        return parse_float(text)
    if kind in ("datetime", "datetime-local", "date-local", "time-local"):
        return parse_datetime(kind, text)
    return text


def compare(expected, actual, path="$"):
    """None if equal by meaning, else a description of the first difference."""
    if is_tagged(expected):
        if not is_tagged(actual):
            return "%s: expected a %s, got %s" % (path, expected["type"], json.dumps(actual))
        if expected["type"] != actual["type"]:
            return "%s: expected type %s, got %s" % (path, expected["type"], actual["type"])
        try:
            same = scalar_key(expected) == scalar_key(actual)
        except ValueError as e:
            return "%s: %s" % (path, e)
        if not same:
            return "%s: expected %r, got %r" % (path, expected["value"], actual["value"])
        return None
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or is_tagged(actual):
            return "%s: expected a table, got %s" % (path, json.dumps(actual))
        if set(expected) != set(actual):
            return "%s: keys differ: expected %s, got %s" % (
                path, sorted(expected), sorted(actual))
        for k in expected:
            diff = compare(expected[k], actual[k], "%s.%s" % (path, json.dumps(k)))
            if diff:
                return diff
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return "%s: expected an array, got %s" % (path, json.dumps(actual))
        if len(expected) != len(actual):
            return "%s: expected %d elements, got %d" % (path, len(expected), len(actual))
        for i, (e, a) in enumerate(zip(expected, actual)):
            diff = compare(e, a, "%s[%d]" % (path, i))
            if diff:
                return diff
        return None
    return "%s: unexpected value in expected file: %r" % (path, expected)


def run_decoder(decoder, toml_path):
    with open(toml_path, "rb") as f:
        return subprocess.run([decoder], stdin=f, capture_output=True, timeout=TIMEOUT_S)


def check_valid(decoder, base, case):
    proc = run_decoder(decoder, base / case)
    if proc.returncode != 0:
        return "rejected (exit %d): %s" % (proc.returncode,
                                           proc.stderr.decode(errors="replace").strip())
    try:
        actual = json.loads(proc.stdout)
    except ValueError as e:
        return "output is not JSON: %s" % e
    with open(base / (case[:-len(".toml")] + ".json"), encoding="utf-8") as f:
        expected = json.load(f)
    return compare(expected, actual)


def check_invalid(decoder, base, case):
    proc = run_decoder(decoder, base / case)
    if proc.returncode < 0:
        return "decoder crashed (signal %d)" % -proc.returncode
    if proc.returncode == 0:
        return "accepted invalid input"
    if not proc.stderr.strip():
        return "rejected without a message on stderr"
    return None


def main():
    if len(sys.argv) != 2:
        print("usage: %s DECODER" % sys.argv[0], file=sys.stderr)
        return 2
    decoder = os.path.abspath(sys.argv[1])
    base = data_dir()
    listing = base / "files-toml-1.0.0"
    if not listing.is_file():
        # Meson reads exit status 77 as "skipped": a plain clone without ../shared
        # beside it still passes, and says why this test did not run.
        print("SKIP: toml-test data not found at %s (set TOML_TEST_DIR, or check out "
              "the shared data beside the repository)" % listing)
        return 77
    cases = [line.strip() for line in listing.read_text().splitlines()
             if line.strip().endswith(".toml")]
    passed, failures = 0, []
    for case in cases:
        check = check_valid if case.startswith("valid/") else check_invalid
        try:
            problem = check(decoder, base, case)
        except subprocess.TimeoutExpired:
            problem = "timed out after %d s" % TIMEOUT_S
        if problem:
            failures.append((case, problem))
        else:
            passed += 1
    for case, problem in failures:
        print("FAIL %s: %s" % (case, problem))
    print("%d passed, %d failed" % (passed, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

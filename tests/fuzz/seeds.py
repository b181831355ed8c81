#!/usr/bin/python3
"""Writes the seed corpora of the fuzz harnesses into tests/fuzz/corpus/<harness>/.

The seeds are small, valid (and a few invalid) inputs of each format, so that fuzzing
starts from the shapes that matter; the files are kept in the repository and replayed by
`make check` (tests/fuzz/run.sh --smoke). Run this again after changing it; for TOML it
takes a fixed sample of the toml-test cases in ../shared/data/toml-test (when present).

    /usr/bin/python3 tests/fuzz/seeds.py
"""
import json
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
TOML_TEST = HERE.parents[2] / "shared" / "data" / "toml-test"


def write(harness, name, data):
    d = CORPUS / harness
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def toml_seeds():
    cfg = """# gflow.toml
[daemon]
socket_path = "/run/gflow/gflowd.sock"
data_dir = '/var/lib/gflow'
max_running_jobs = 4
kill_grace_secs = 10
log_level = "debug"
gpus = "0,2-3"
gpu_allocation_strategy = "sequential"
gpu_poll_interval_secs = 5
gpu_id_format = "uuid"
constrain_devices = true
"""
    write("toml", "gflow.toml", cfg)
    write("config", "full.toml", cfg)
    write("config", "empty.toml", "")
    write("config", "comment.toml", "# nothing set\n\n[daemon]\n")
    write("config", "unknown-key.toml", "[daemon]\nmax_runing_jobs = 3\n")
    write("config", "wrong-type.toml", "[daemon]\nkill_grace_secs = \"10\"\n")
    write("config", "below-min.toml", "[daemon]\ngpu_poll_interval_secs = 0\n")
    write("config", "choice.toml", "[daemon]\nlog_level = \"verbose\"\n")
    write("config", "dotted.toml", "daemon.admin_group = \"gpu\"\ndaemon.nvml_library = \"x.so\"\n")
    write("config", "inline.toml", "daemon = {max_request_bytes = 1048576, gpus = \"all\"}\n")
    write("config", "nul-key.toml", "[daemon]\n\"a\\u0000b\" = 1\n")
    write("config", "other-section.toml", "[scheduler]\npolicy = \"fifo\"\n")
    write("config", "limits.toml", "[daemon]\nmax_request_bytes = 1024\n[limits]\n"
          "max_request_bytes = 2048\nmax_connections = 10\nmax_connections_per_user = 2\n"
          "idle_timeout_secs = 5\nmax_jobs_per_request = 100\nmax_active_jobs_per_user = 1000\n"
          "max_ids_per_request = 50\nmax_log_scan_bytes = 4096\n"
          "max_body_bytes_in_flight = 65536\n")
    write("config", "limits-low.toml", "[limits]\nmax_log_scan_bytes = 4095\n")
    if not TOML_TEST.is_dir():
        return
    # A fixed sample: every 6th valid case and every 14th invalid one (of toml 1.0.0).
    listed = (TOML_TEST / "files-toml-1.0.0").read_text().split()
    valid = sorted(p for p in listed if p.startswith("valid/") and p.endswith(".toml"))
    invalid = sorted(p for p in listed if p.startswith("invalid/") and p.endswith(".toml"))
    for p in valid[::6] + invalid[::14]:
        name = p.replace("/", "-")
        shutil.copyfile(TOML_TEST / p, CORPUS / "toml" / name)


def jobspec_seeds():
    env = {"HOME": "/home/u", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    seeds = {
        "command.json": {"command": "python train.py --lr 0.1", "workdir": "/home/u", "env": env},
        "script.json": {"script": "#!/bin/bash\n# GFLOW --time 10\necho hi\n",
                        "script_path": "/home/u/run.sh", "workdir": "/home/u", "env": {}},
        "stdin-script.json": {"script": "echo x", "workdir": "/"},
        "gpus.json": {"command": "nvidia-smi", "workdir": "/tmp", "gpus": 2,
                      "gpu_memory_mb": 20000, "gpus_per_task": 1, "priority": 200,
                      "time_limit": 3600, "signal_spec": "B:USR1@60", "memory_mb": 1024,
                      "max_retries": 2, "conda_env": "torch", "begin_time": 1700000100.5},
        "shared.json": {"command": "x", "workdir": "/w", "gpus": 1, "shared": True,
                        "gpu_memory_mb": 4096},
        "deps.json": {"command": "eval", "workdir": "/w", "name": "eval",
                      "depends_on": [{"id": 3, "kind": "afterok"}, {"id": 4, "kind": "afterany"},
                                     5],
                      "depends_mode": "any", "auto_cancel": False, "hold": True},
        "dry.json": {"command": "true", "workdir": "/", "dry_run": True},
        "array.json": {"command": "echo $GFLOW_ARRAY_TASK_ID", "workdir": "/w",
                       "array": "1-5:2,8%2", "name": "arr"},
        "sweep.json": {"command": "python t.py --lr {lr} --bs '{bs}'", "workdir": "/w",
                       "params": {"names": ["lr", "bs"], "rows": [["0.1", "32"], ["0.01", "64"]]},
                       "name_template": "run-{lr}-{bs}", "max_concurrent": 1},
        "sweep-script.json": {"script": "echo \"{x}\"", "workdir": "/w",
                              "params": {"names": ["x"], "rows": [["a b"], ["c'd"]]}},
        "batch.json": {"jobs": [{"command": "a", "workdir": "/"},
                                {"command": "b", "workdir": "/", "gpus": 1}],
                       "max_concurrent": 1, "dry_run": False},
        "bad-field.json": {"command": "a", "workdir": "/", "colour": "red"},
        "bad-workdir.json": {"command": "a", "workdir": "relative"},
        "too-many-gpus.json": {"command": "a", "workdir": "/", "gpus": 5},
        # Regressions: names gflow made up that were not valid names; a command's
        # script_path that a round trip dropped.
        "long-word.json": {"command": "/opt/" + "x" * 300 + " --flag", "workdir": "/"},
        "regress-control-name.json": {"command": "a\rb c", "workdir": "/"},
        "regress-array-long-name.json": {"command": "true", "workdir": "/", "name": "n" * 200,
                                         "array": "9-10"},
        "regress-command-script-path.json": {"command": "x", "script_path": "/s.sh",
                                             "workdir": "/w"},
    }
    for name, spec in seeds.items():
        write("jobspec", name, json.dumps(spec))


def jobcodec_seeds():
    job = {"id": 1, "name": "true_1", "user": "root", "uid": 0, "state": "CD",
           "state_name": "Finished", "priority": 10, "time_limit": None,
           "submit_time": 1796137494.760072, "start_time": 1796137494.760634,
           "end_time": 1796137494.792614, "exit_code": 0, "signal": None, "signal_name": None,
           "oom": False, "reason": None, "command": "true", "script_path": None,
           "workdir": "/tmp/w", "gpus": 0, "gpu_ids": None, "shim_pid": 31388,
           "max_rss_kb": 972, "gpu_memory_mb": 0, "shared": False, "gpus_per_task": 0,
           "depends_on": [], "depends_mode": "all", "auto_cancel": True, "memory_mb": 0,
           "conda_env": None, "signal_spec": None, "begin_time": None, "max_retries": 0,
           "attempt": 1, "retry_of": None, "group_id": 1, "array_task": 1,
           "max_concurrent": None, "script": None, "env": {"HOME": "/root"}, "params": None,
           "log_path": "/tmp/w/data/logs/1.log"}
    write("jobcodec", "json-finished", b"\0" + json.dumps(job).encode())
    running = dict(job, id=7, state="R", state_name="Running", gpus=2, gpu_ids="0,3",
                   exit_code=None, end_time=None, cancelling=True, time_limit=600,
                   signal_spec="B:USR1@60", reason=None,
                   depends_on=[{"id": 3, "kind": "afterok"}, {"id": 5, "kind": "afternotok"}],
                   depends_mode="any", params={"lr": "0.1"})
    write("jobcodec", "json-running", b"\0" + json.dumps(running).encode())
    failed = dict(job, id=9, state="F", state_name="Failed", exit_code=None, signal=9,
                  signal_name="SIGKILL", reason="ShimLost: gflow-shim killed by SIGKILL",
                  oom=True, begin_time=1796137000.5, retry_of=8, attempt=2)
    write("jobcodec", "json-failed", b"\0" + json.dumps(failed).encode())
    write("jobcodec", "json-depfail",
          b"\0" + json.dumps(dict(job, state="CA", reason="DependencyFailed:4")).encode())
    # TSV: byte 1 (odd: TSV), a field count, the fields (enum job_field order), the line.
    header = ("id name user uid state state_name priority time_limit submit_time start_time "
              "end_time exit_code signal signal_name oom reason command script_path workdir "
              "gpus gpu_ids shim_pid max_rss_kb gpu_memory_mb shared gpus_per_task depends_on "
              "depends_mode auto_cancel memory_mb conda_env signal_spec begin_time max_retries "
              "attempt retry_of group_id array_task max_concurrent").split()
    line = ("1\ttrue_1\troot\t0\tCD\tFinished\t10\t\\N\t1796137494.760072\t1796137494.760634\t"
            "1796137494.792614\t0\t\\N\t\\N\tfalse\t\\N\techo 'a\\tb'\\\\\t\\N\t/tmp/w\t0\t\\N\t"
            "31388\t972\t0\tfalse\t0\tafterok:3,afterany:4\tall\ttrue\t0\t\\N\tB:USR1@60\t\\N\t0\t"
            "1\t\\N\t1\t1\t\\N")
    n = len(header)
    write("jobcodec", "tsv-all", bytes([1, n]) + bytes(range(n)) + line.encode())
    # gqueue's default fields: id, name, state, time (start/end), gpus, reason...
    pick = [0, 1, 4, 9, 10, 19, 20, 15, 2]
    vals = ["12", "sweep_3", "R", "1796137494.5", "\\N", "2", "0,1", "\\N", "alice"]
    write("jobcodec", "tsv-gqueue",
          bytes([1, len(pick)]) + bytes(pick) + "\t".join(vals).encode())
    # Regression: a time too large for microseconds in 64 bits (undefined conversion).
    write("jobcodec", "regress-huge-time", bytes([1, 3, 32, 8, 10]) + b"1e300\t1e12\tinf")
    write("jobcodec", "regress-huge-begin-json",
          b"\0" + json.dumps(dict(job, begin_time=1e300)).encode())
    write("jobcodec", "tsv-reason",
          bytes([1, 2, 0, 15]) + b"4\tLaunchFailed: chdir /x: No such file")


def exitfile_seeds():
    rec = {"job_id": 12, "exit_code": 0, "signal": None, "oom": False,
           "started_at": 1700000000.123456, "finished_at": 1700000005.5, "max_rss_kb": 2048,
           "error": None}
    write("exitfile", "exit-ok", b"\0" + json.dumps(rec).encode() + b"\n")
    write("exitfile", "exit-signal", b"\0" + json.dumps(
        dict(rec, exit_code=None, signal=9, oom=True, memory_enforcement="cgroup v2")).encode())
    write("exitfile", "exit-error", b"\0" + json.dumps(
        dict(rec, exit_code=125, error="cannot chdir to /home/\u00e9: No such file")).encode())
    write("exitfile", "exit-garbage", b"\0" + b'{"job_id": -3, "exit_code": 300, "started_at": '
          b'1e400, "error": 5}')
    write("exitfile", "lock-pid", b"\1" + b"4242 987654\n")
    write("exitfile", "lock-error", b"\1" + b"4242 987654\nerror: cannot exec: Permission denied\n")
    write("exitfile", "lock-lost", b"\1" + b"17 5\nlost: cannot write the exit file: ENOSPC\n")
    write("exitfile", "lock-empty", b"\1")
    write("exitfile", "lock-error-only", b"\1" + b"\nerror: setuid failed\n")


def parse_seeds():
    cases = [
        (0, ["1,3,5-7", "42", "1-1000", "0", "5-3", "1,,2"]),
        (1, ["30", "10:30", "1:00:00", "2-03:04:05", "1-0", "0:60", "99999999999999999999"]),
        (2, ["512", "512M", "24G", "1T", "2048K", "1.5G", "0"]),
        (3, ["USR1", "B:SIGUSR1@60", "term@10", "40@5", "SIGRTMIN@1", "KILL@65536"]),
        (4, ["now", "now+10m", "23:59", "2026-02-28", "2026-02-30T10:00:00",
             "2024-12-31 08:15:30"]),
        (5, ["1-10", "1-10:2", "1,3,7", "0-99%4", "1-3,8,10-20:5%2", "5-1", "1-2:0"]),
        (6, ["lr=0.1,0.01", "lr=0.1:0.5:0.1", "n=1:10", "x=", "9a=1", "s=a b,c"]),
        (7, ["lr,bs\n0.1,32\n0.01,64\n", "a,\"b,c\"\r\n\"x\"\"y\",2\r\n", "a\n\n1\n", "\"open\n"]),
        (8, ["@", "@~3", "@x", "7", "255", "256"]),
    ]
    for which, inputs in cases:
        for i, s in enumerate(inputs):
            write("parse", f"{which}-{i}", bytes([which]) + s.encode())
    # Regressions: an id at INT64_MAX (the range loop overflowed), a step past the end.
    write("parse", "regress-id-max", b"\0" + b"9223372036854775807")
    write("parse", "regress-array-step", b"\5" + b"1-5:9223372036854775807")
    write("parse", "regress-id-total", b"\0" + b"1-600000,1-600000")
    # Shell quoting: NUL-separated words.
    for i, words in enumerate([["python", "train.py", "--lr", "0.1"], ["a b", "it's", ""],
                               ["echo $HOME; rm -rf /"]]):
        write("parse", f"9-{i}", bytes([9]) + "\0".join(words).encode())


def cudavis_seeds():
    # First byte: GPUs (low 4 bits), mixed models (16), CUDA_DEVICE_ORDER=PCI_BUS_ID (32).
    cases = [(8, "1,3"), (8, "1,foo,3"), (8, "3,1,3,0"), (8, ""), (8, "0,,2"), (8, "4,"),
             (4, "GPU-00000001-0000-4000-8000-000000000002"), (4, "GPU-00000001"),
             (4, "gpu-00000000-0000-4000-8000-00000000000"), (4, "GPU-ffff,1"),
             (2, "MIG-4f1b1d5c-8ac6-5a4b-9c8e-2f5a6c0b1d2e,0"), (2, "MIG-a,MIG-a"),
             (8 | 16, "1,7"), (8 | 16 | 32, "1,7"), (0, "0"), (8, " 5 , 0"), (8, "-1"),
             (8, "99999999999999999999999")]
    for i, (shape, spec) in enumerate(cases):
        write("cudavis", f"{i:02d}", bytes([shape]) + spec.encode())


def client_seeds():
    body = b'{"jobs":[{"id":7,"name":"train","state":"PD"}]}'
    ok = (b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: "
          + str(len(body)).encode() + b"\r\n\r\n" + body)
    write("client", "content-length", b"\0" + ok)
    write("client", "keepalive-two", b"\2" + ok + ok)
    write("client", "chunked", b"\0" + b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
          b"Content-Type: text/plain\r\n\r\n5\r\nhello\r\n7;ext=1\r\n world\n\r\n0\r\n"
          b"Trailer: x\r\n\r\n")
    write("client", "chunked-stop", b"\x08" + b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
          b"\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n")
    write("client", "continue", b"\0" + b"HTTP/1.1 100 Continue\r\n\r\n" + ok)
    write("client", "eof-body",
          b"\0" + b"HTTP/1.0 200 OK\r\nConnection: close\r\n\r\nuntil the end")
    write("client", "error-413", b"\1" + b"HTTP/1.1 413 Payload Too Large\r\nConnection: close\r\n"
          b"Content-Length: 30\r\n\r\n{\"error\":\"request too large\"}\n")
    write("client", "no-content", b"\0" + b"HTTP/1.1 204 No Content\r\n\r\n")
    write("client", "reconnect", b"\2" + b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
          b"<<CONNECT>>" + ok)
    write("client", "garbage", b"\0" + b"SSH-2.0-OpenSSH_9.2\r\n")
    write("client", "bad-length", b"\0" + b"HTTP/1.1 200 OK\r\nContent-Length: 12x\r\n\r\n")
    write("client", "lf-only", b"\0" + b"HTTP/1.1 404 Not Found\nContent-Length: 3\n\nno\n")
    write("client", "empty", b"\0")
    # Regression: a repeated Content-Type header leaked the first one.
    write("client", "regress-two-content-types", b"\0" + b"HTTP/1.1 200 OK\r\nContent-Type: a\r\n"
          b"Content-Type: b\r\nContent-Length: 0\r\n\r\n")


def attachproto_seeds():
    def frame(t, payload=b""):
        return t + len(payload).to_bytes(4, "big") + payload
    keys = b"ctrl-b,d"
    stream = frame(b"H", b"\1") + frame(b"D", b"hello\r") + frame(b"W", bytes([0, 24, 0, 80]))
    write("attachproto", "frames", bytes([len(keys) | 0x30]) + keys + stream)
    write("attachproto", "detach", bytes([len(keys)]) + keys + b"ab\x02x\x02\x02dtail")
    write("attachproto", "partial", bytes([len(keys) | 0x10]) + keys + b"ok\x02")
    write("attachproto", "bad-keys", bytes([5]) + b"ctrl-" + frame(b"E"))
    write("attachproto", "oversized", bytes([1]) + b"q" + b"D\x00\x01\x00\x01")


def main():
    if CORPUS.exists():
        shutil.rmtree(CORPUS)
    toml_seeds()
    jobspec_seeds()
    jobcodec_seeds()
    exitfile_seeds()
    parse_seeds()
    cudavis_seeds()
    client_seeds()
    attachproto_seeds()
    for d in sorted(CORPUS.iterdir()):
        files = list(d.iterdir())
        print(f"{d.name}: {len(files)} files, {sum(f.stat().st_size for f in files)} bytes")


if __name__ == "__main__":
    main()

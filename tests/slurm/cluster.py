"""A throwaway single-node Slurm cluster for tests/slurm, from Debian's munge, slurmctld
and slurmd packages (scripts/install-deps.sh --slurm).

Everything lives under one directory: munge's key, socket, pid and log; slurm.conf and
gres.conf (generated here); the state, spool, pid and log files of both Slurm daemons. The
daemons listen on free ports of 127.0.0.1, are started in the foreground as children of
this process and stopped by their pids, so nothing of the system's own munge or Slurm is
read or touched. The node has fake GPUs: gres.conf names links made here to harmless
character devices (/dev/null, ...), which is enough for Slurm to count them and set
CUDA_VISIBLE_DEVICES (there are no cgroups to constrain them with).

Run directly (python3 tests/slurm/cluster.py) it starts a cluster, runs
`sbatch --wrap hostname`, waits for the job and prints its output: a smoke test of the
machine's Slurm installation.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FAKE_GPU_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/urandom")
GPUS = len(FAKE_GPU_DEVICES)
PARTITION = "gflow"
NEEDED = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel")


def missing_programs():
    """The programs the cluster needs that are not installed (a reason to skip)."""
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    return [p for p in NEEDED if not shutil.which(p, path=path)]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(what, predicate, timeout, proc_list=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, p in proc_list:
            if p.poll() is not None:
                raise RuntimeError(f"{name} exited with {p.returncode} while waiting for {what}")
        if predicate():
            return
        time.sleep(0.2)
    raise RuntimeError(f"timed out after {timeout}s waiting for {what}")


class SlurmCluster:
    def __init__(self, root):
        self.root = Path(root)
        self.node = socket.gethostname().split(".")[0]
        self.procs = []  # (name, Popen), in start order
        self.munge_socket = self.root / "munge" / "munge.socket"
        self.conf = self.root / "etc" / "slurm.conf"
        self.env = dict(os.environ)
        self.env["SLURM_CONF"] = str(self.conf)
        self.env["PATH"] = self.env.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin"

    # ---- configuration

    def _write_munge(self):
        d = self.root / "munge"
        d.mkdir(mode=0o700, parents=True)
        key = d / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        return d

    def _write_slurm_conf(self):
        etc = self.root / "etc"
        etc.mkdir(parents=True)
        for sub in ("state", "spool", "log", "run", "dev"):
            (self.root / sub).mkdir()
        # Slurm wants each GPU's File to be a character device: links to harmless ones
        # (nothing opens them, and without cgroups nothing is constrained by them).
        for i in range(GPUS):
            (self.root / "dev" / f"gpu{i}").symlink_to(FAKE_GPU_DEVICES[i])
        (etc / "gres.conf").write_text(
            f"NodeName={self.node} Name=gpu File={self.root}/dev/gpu[0-{GPUS - 1}]\n")
        (etc / "cgroup.conf").write_text("CgroupPlugin=autodetect\nIgnoreSystemd=yes\n")
        (etc / "plugstack.conf").write_text("")
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1 << 20)
        self.ctld_port = _free_port()
        self.slurmd_port = _free_port()
        r = self.root
        self.conf.write_text(f"""\
ClusterName=gflowtest
SlurmctldHost={self.node}(127.0.0.1)
SlurmctldPort={self.ctld_port}
SlurmdPort={self.slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket}
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/run/slurmctld.pid
SlurmdPidFile={r}/run/slurmd.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig={etc}/plugstack.conf
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
ReturnToService=2
MinJobAge=600
KillWait=2
OverTimeLimit=0
InactiveLimit=0
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
MpiDefault=none
LaunchParameters=use_interactive_step
NodeName={self.node} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} RealMemory={mem // 2} Gres=gpu:{GPUS} State=UNKNOWN
PartitionName={PARTITION} Nodes={self.node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
""")

    # ---- starting and stopping

    def _spawn(self, name, argv):
        log = open(self.root / "log" / f"{name}.out", "wb")
        p = subprocess.Popen(argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        self.procs.append((name, p))
        return p

    def start(self):
        munge_dir = self._write_munge()
        self._write_slurm_conf()
        self._spawn("munged", [
            "munged", "-F", "--force", f"--socket={self.munge_socket}",
            f"--key-file={munge_dir}/munge.key", f"--pid-file={munge_dir}/munged.pid",
            f"--log-file={munge_dir}/munged.log", f"--seed-file={munge_dir}/munged.seed"])
        _wait("munged's socket", self.munge_socket.exists, 20, self.procs)
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
        _wait("slurmctld", lambda: self.run_ok("scontrol", "ping"), 30, self.procs)
        self._spawn("slurmd", ["slurmd", "-D", "-f", str(self.conf), "-N", self.node])
        _wait("the node to be idle", self._node_idle, 60, self.procs)
        return self

    def _node_idle(self):
        r = self.run("sinfo", "-h", "-N", "-o", "%T")
        return r.returncode == 0 and r.stdout.strip() in ("idle", "mixed", "allocated")

    def stop(self):
        for name, p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs = []

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ---- Slurm commands against this cluster

    def run(self, *argv, timeout=30):
        return subprocess.run(argv, env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def run_ok(self, *argv):
        try:
            return self.run(*argv).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def job_field(self, slurm_id, field):
        """One field (JobState, ExitCode, ...) of `scontrol show job -o`, or None."""
        r = self.run("scontrol", "show", "job", "-o", str(slurm_id))
        for word in r.stdout.split():
            k, _, v = word.partition("=")
            if k == field:
                return v
        return None

    def logs(self):
        """The daemons' logs, for a failing test's report."""
        out = []
        for p in sorted((self.root / "log").glob("*")) + [self.root / "munge" / "munged.log"]:
            if p.exists():
                out.append(f"==== {p.name}\n{p.read_text(errors='replace')[-4000:]}")
        return "\n".join(out)


def main():
    missing = missing_programs()
    if missing:
        sys.exit(f"missing {' '.join(missing)}: run scripts/install-deps.sh --slurm")
    root = tempfile.mkdtemp(prefix="gflow-slurm-")
    c = SlurmCluster(root)
    try:
        c.start()
        out = Path(root) / "hostname.out"
        r = c.run("sbatch", "--parsable", f"--output={out}", "--wrap", "hostname")
        if r.returncode != 0:
            raise RuntimeError(f"sbatch failed: {r.stderr.strip()}")
        slurm_id = r.stdout.strip().split(";")[0]
        _wait(f"job {slurm_id}", lambda: c.job_field(slurm_id, "JobState") == "COMPLETED", 60)
        print(f"job {slurm_id} COMPLETED: {out.read_text().strip()}")
    except Exception:
        print(c.logs(), file=sys.stderr)
        raise
    finally:
        c.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

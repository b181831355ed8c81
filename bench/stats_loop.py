"""Starts an isolated gflowd on a copy of stats_bench's 1M-job database, runs gstats,
and meanwhile asks GET /v1/health every 5 ms: the longest health answer while gstats
runs is how long the statistics held the event loop.

Usage: STATS_BENCH_KEEP=1 build/stats_bench   (prints "kept PATH")
       python3 bench/stats_loop.py build PATH"""
import os, shutil, socket, subprocess, sys, tempfile, threading, time, http.client
build, db = sys.argv[1], sys.argv[2]
root = tempfile.mkdtemp(prefix="gstats-probe-")
data = os.path.join(root, "data"); os.makedirs(data)
shutil.copy(db, os.path.join(data, "gflow.db"))
sock = os.path.join(root, "gflowd.sock")
env = dict(os.environ, GFLOW_DAEMON__DATA_DIR=data, GFLOW_DAEMON__SOCKET_PATH=sock,
           GFLOW_SOCKET=sock, XDG_RUNTIME_DIR=root, XDG_CONFIG_HOME=root, XDG_DATA_HOME=root,
           GFLOW_DAEMON__CONTAINER="no")
subprocess.run([f"{build}/gflowd", "up", "--simulate-gpus", "2"], env=env, check=True)
class C(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX); self.sock.connect(sock)
lat = []; stop = False
def probe():
    c = C("localhost")
    while not stop:
        t = time.monotonic(); c.request("GET", "/v1/health"); c.getresponse().read()
        lat.append(time.monotonic() - t); time.sleep(0.005)
try:
    th = threading.Thread(target=probe); th.start(); time.sleep(0.2)
    base = max(lat)
    for args in (["--since", "8d"], ["--since", "8d", "--by", "gpu"]):
        lat.clear(); t = time.monotonic()
        cp = subprocess.run([f"{build}/gstats", *args, "-o", "json"], env=env, capture_output=True, text=True)
        took = time.monotonic() - t
        import json; n = json.loads(cp.stdout)["total"]["jobs"]
        print(f"gstats {' '.join(args)}: {n} jobs in {took*1000:.0f} ms (client to answer); "
              f"longest /v1/health meanwhile {max(lat)*1000:.1f} ms over {len(lat)} probes")
    stop = True; th.join()
    print(f"longest /v1/health before: {base*1000:.1f} ms")
finally:  # the daemon goes down whatever happened
    stop = True
    subprocess.run([f"{build}/gflowd", "down"], env=env)
    shutil.rmtree(root)

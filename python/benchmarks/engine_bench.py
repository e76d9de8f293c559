"""Engines against tfhvdrun: the same Keras fit started by tfhvdrun, by Slurm's srun and by
tf_hvd.ray.RayExecutor on one namespace cluster, interleaved in rounds.

Used by multihost_bench.py (``--engines``), on the cluster it made (link shaped):

* tfhvdrun  ``tfhvdrun -np N -H h1:P,h2:P python engine_fit.py`` on h1 (ranks on h2 over ssh)
* slurm     ``srun -N 2 --ntasks-per-node P python engine_fit.py`` on h1, on a real Slurm
            (tools/clusters/slurm_cluster.py: munged with a fresh key, slurmctld, a slurmd per host)
* ray       engine_ray_driver.py on h1: RayExecutor(num_hosts=2, num_workers_per_host=P)
            on a Ray head on h1 and a worker node on h2 (``ray start``, cluster token)

Every round runs each contender once, in that order (tfhvdrun, slurm, ray, tfhvdrun, ...),
so slow drifts of the machine's load hit all of them alike; the summary gives per
contender the median, min, max and spread of rank 0's samples/s over the rounds, the
ratio of each engine's median to tfhvdrun's, and the median of the per-round ratios.
Start-up (command start to hvd.init() done, and to the first timed step) is reported
apart. The load average is recorded before and after every run.
"""

import json
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import time

from lib import formats, jsonio, tables
import engine_fit

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
FIT_PY = os.path.join(HERE, "engine_fit.py")
RAY_DRIVER_PY = os.path.join(HERE, "engine_ray_driver.py")
ENGINES = ("tfhvdrun", "slurm", "ray")
RAY_PORT = 6379
RAY_STARTED = "This command will now block forever"


def make_config(quick, steps=None, warmup=None, batch=64):
    return {"model": "mlp", "batch_per_worker": int(batch),
            "steps": int(steps or (100 if quick else 300)),
            "warmup": int(warmup or (10 if quick else 20)),
            "learning_rate": 0.01, "momentum": 0.9}


def job_env(extra=None):
    """The environment of every contender's processes (the same for all three)."""
    env = dict(os.environ)
    for name in list(env):
        if name.startswith(("HOROVOD_", "PMI_", "OMPI_", "SLURM_", "RAY_")):
            del env[name]
    env["PYTHONPATH"] = os.pathsep.join([REPO, HERE])
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    # Ray gives an actor OMP_NUM_THREADS = its CPUs (1): the others get the same.
    env["OMP_NUM_THREADS"] = "1"
    env.update(extra or {})
    return env


class RayNodes(object):
    """A Ray head on h1 and a worker node on h2 (``ray start --block``), with a token for
    this cluster only; stopped by killing their own processes, never with ``ray stop``
    (which would stop every Ray process of the machine)."""

    def __init__(self, cluster, log_dir, cpus_per_node):
        self.cluster, self.log_dir, self.cpus = cluster, log_dir, cpus_per_node
        self.env = job_env({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
                            "RAY_USAGE_STATS_ENABLED": "0"})
        self.procs, self.temps = {}, {}
        self.baseline = set()

    @property
    def address(self):
        return "%s:%d" % (self.cluster.address("h1"), RAY_PORT)

    def start(self, within=180):
        # what runs in the namespaces before Ray (sshd, Slurm's daemons) is left alone
        self.baseline = set(p for h in self.cluster.hosts for p in self.cluster.processes_in(h))
        for host in self.cluster.hosts:
            self._start(host, within)
        return self

    def _start(self, host, within):
        temp = "/tmp/tfbe%d-%s" % (os.getpid() % 10000, host)  # short: Unix socket paths
        self.temps[host] = temp
        ray = os.path.join(os.path.dirname(sys.executable), "ray")
        cmd = [ray, "start", "--block", "--num-cpus", str(self.cpus), "--temp-dir", temp,
               "--node-ip-address", self.cluster.address(host)]
        if host == "h1":
            cmd += ["--head", "--port", str(RAY_PORT), "--include-dashboard=false"]
        else:
            cmd += ["--address", self.address]
        log = os.path.join(self.log_dir, "ray-%s.log" % host)
        with open(log, "wb") as out:
            self.procs[host] = subprocess.Popen(
                self.cluster.exec_argv(host, cmd), env=self.env, cwd=REPO, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + within
        while True:
            with open(log, errors="replace") as f:
                if RAY_STARTED in f.read():
                    return
            if self.procs[host].poll() is not None or time.monotonic() > deadline:
                with open(log, errors="replace") as f:
                    raise RuntimeError("ray start on %s failed:\n%s" % (host, f.read()[-3000:]))
            time.sleep(0.5)

    def stop(self):
        import netns_cluster
        for host in reversed(list(self.procs)):
            proc = self.procs.pop(host)
            _kill_group(proc)
        for host in self.cluster.hosts:
            left = [p for p in self.cluster.processes_in(host) if p not in self.baseline]
            netns_cluster._kill_all(left)
        for temp in self.temps.values():
            shutil.rmtree(temp, ignore_errors=True)
        self.temps = {}


def _kill_group(proc, grace=10.0):
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    except OSError:
        pass


def commands(engine, cluster, slurm, ray_nodes, per_host, config, launch_t):
    """(argv, env) that starts ``engine``'s job of 2 x per_host ranks, from h1."""
    py = sys.executable
    fit = [py, FIT_PY, "--config", json.dumps(config), "--launch-t", "%.6f" % launch_t]
    np_ = 2 * per_host
    if engine == "tfhvdrun":
        layout = ",".join("%s:%d" % (h, per_host) for h in cluster.hosts)
        return (cluster.exec_argv("h1", [py, "-m", "tf_hvd.runner", "-np", str(np_),
                                         "-H", layout] + fit), job_env())
    if engine == "slurm":
        env = slurm.env(job_env({"HOROVOD_GLOO_RENDEZVOUS_SECRET": secrets.token_hex(32)}))
        return (cluster.exec_argv("h1", ["srun", "-N", "2", "--ntasks-per-node",
                                         str(per_host), "--kill-on-bad-exit=1", "--label"]
                                  + fit), env)
    if engine == "ray":
        return (cluster.exec_argv("h1", [py, RAY_DRIVER_PY, "--address", ray_nodes.address,
                                         "--hosts", "2", "--per-host", str(per_host),
                                         "--config", json.dumps(config),
                                         "--launch-t", "%.6f" % launch_t]), ray_nodes.env)
    raise ValueError("unknown engine %r" % engine)


def run_once(engine, round_, cluster, slurm, ray_nodes, per_host, config, log_dir, timeout):
    """One job of ``engine``; returns its record (rank 0's throughput, start-up, load)."""
    load_before = os.getloadavg()
    launch_t = time.time()
    argv, env = commands(engine, cluster, slurm, ray_nodes, per_host, config, launch_t)
    log = os.path.join(log_dir, "engine-%s-r%d.log" % (engine, round_))
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            rc = "timeout"
    wall = time.time() - launch_t
    with open(log, errors="replace") as f:
        text = f.read()
    ranks = engine_fit.parse_results(text)
    rec = {"engine": engine, "round": round_, "rc": rc, "wall_s": round(wall, 2),
           "loadavg_before": load_before, "loadavg_after": os.getloadavg(), "log": log,
           "ranks": ranks}
    ok = rc == 0 and len(ranks) == 2 * per_host and all(r["samples_per_s"] for r in ranks)
    rec["status"] = "ok" if ok else "failed"
    if ok:
        r0 = ranks[0]
        rec["samples_per_s"] = r0["samples_per_s"]
        rec["start_to_init_s"] = max(r["start_to_init_s"] for r in ranks)
        rec["start_to_timed_s"] = max(r["start_to_timed_s"] for r in ranks)
        rec["hosts"] = [r["host"] for r in ranks]
    else:
        rec["output_tail"] = text[-3000:]
    for line in text.splitlines():
        if line.startswith("ENGINE_RAY "):
            rec["ray_driver"] = json.loads(line[len("ENGINE_RAY "):])
    tables.log("[engines] round %d %-8s %s %s samples/s, start-up %s s, load %.2f"
               % (round_, engine, rec["status"], formats.fmt(rec.get("samples_per_s"), 5),
                  formats.fmt(rec.get("start_to_timed_s"), 3), load_before[0]))
    return rec


def _stats(values):
    if not values:
        return None
    med = statistics.median(values)
    return {"n": len(values), "median": med, "min": min(values), "max": max(values),
            "spread_pct": 100.0 * (max(values) - min(values)) / med if med else None}


def summarize(runs):
    """Per engine: throughput and start-up statistics over the rounds; ratios to tfhvdrun."""
    out = {}
    for engine in ENGINES:
        ok = [r for r in runs if r["engine"] == engine and r["status"] == "ok"]
        if not any(r["engine"] == engine for r in runs):
            continue
        out[engine] = {
            "runs_ok": len(ok), "runs": sum(1 for r in runs if r["engine"] == engine),
            "samples_per_s": _stats([r["samples_per_s"] for r in ok]),
            "start_to_init_s": _stats([r["start_to_init_s"] for r in ok]),
            "start_to_timed_s": _stats([r["start_to_timed_s"] for r in ok]),
            "per_round_samples_per_s": [round(r["samples_per_s"], 1) for r in ok]}
    base = out.get("tfhvdrun", {}).get("samples_per_s")
    by_round = dict(((r["engine"], r["round"]), r) for r in runs if r["status"] == "ok")
    for engine, entry in out.items():
        if engine == "tfhvdrun" or not base or not entry["samples_per_s"]:
            continue
        entry["ratio_of_medians"] = entry["samples_per_s"]["median"] / base["median"]
        paired = [by_round[(engine, n)]["samples_per_s"] / by_round[("tfhvdrun", n)]
                  ["samples_per_s"] for (e, n) in by_round
                  if e == engine and ("tfhvdrun", n) in by_round]
        entry["per_round_ratio"] = _stats(paired)
        entry["meets_0_97"] = entry["ratio_of_medians"] >= 0.97
    return out


def run_rounds(cluster, rounds, per_host, config, log_dir, timeout, engines=ENGINES):
    """Brings up Slurm and Ray on ``cluster``, runs the rounds, tears both down."""
    import slurm_cluster
    runs, setup = [], {}
    reason = slurm_cluster.available()
    if reason:
        raise RuntimeError("cannot run Slurm here: %s" % reason)
    t0 = time.time()
    with slurm_cluster.SlurmCluster(cluster) as slurm:
        setup["slurm_up_s"] = round(time.time() - t0, 1)
        ray_nodes = RayNodes(cluster, log_dir, cpus_per_node=max(2, per_host))
        try:
            t0 = time.time()
            if "ray" in engines:
                ray_nodes.start()
            setup["ray_up_s"] = round(time.time() - t0, 1)
            for n in range(rounds):
                for engine in engines:
                    runs.append(run_once(engine, n, cluster, slurm, ray_nodes, per_host,
                                         config, log_dir, timeout))
        finally:
            ray_nodes.stop()
    return runs, setup


def table_rows(summary):
    """Rows for print_table: the engines' medians, spreads, ratios and start-ups."""
    rows = []
    for engine, e in summary.items():
        sps, paired = e["samples_per_s"] or {}, e.get("per_round_ratio") or {}
        rows.append([engine, "%d/%d" % (e["runs_ok"], e["runs"]),
                     formats.fmt(sps.get("median"), 4),
                     "%s-%s" % (formats.fmt(sps.get("min"), 4), formats.fmt(sps.get("max"), 4)),
                     formats.fmt(sps.get("spread_pct"), 2),
                     formats.fmt(e.get("ratio_of_medians"), 3),
                     "%s (%s-%s)" % (formats.fmt(paired.get("median"), 3),
                                     formats.fmt(paired.get("min"), 3),
                                     formats.fmt(paired.get("max"), 3)) if paired else "-",
                     formats.fmt((e["start_to_timed_s"] or {}).get("median"), 3)])
    return rows


TABLE_HEADERS = ["engine", "ok", "samples/s median", "min-max", "spread %",
                 "ratio (medians)", "per-round ratio median (min-max)", "start-up s"]


def print_summary(summary, title="engines (rank 0's samples/s after warm-up)"):
    tables.print_table(title, TABLE_HEADERS, table_rows(summary))


if __name__ == "__main__":
    # python engine_bench.py results/multihost_engines_np2.json: the table again
    data = jsonio.read_json(sys.argv[1])
    print_summary((data.get("engines") or data)["summary"])

"""tf_hvd across two hosts over a shaped link, against MultiWorkerMirroredStrategy.

    python python/benchmarks/multihost_bench.py [--quick] [--rate-mbit 1000] [--delay-ms 0.2]

Needs root: it makes a namespace cluster (tools/netns_cluster.py) of 2 hosts with the
link between them shaped (tbf rate, netem delay where the kernel has netem), runs every
contender with 2 ranks on each host, and tears the cluster down. Contenders, one after
the other in one run:

  tf_hvd_gloo       tfhvdrun -np 4 -H h1:2,h2:2 (flat allreduce)
  tf_hvd_gloo_hier  the same with HOROVOD_HIERARCHICAL_ALLREDUCE=1 (reduce on the host,
                    allreduce across hosts, share on the host), when the library knows
                    the knob; otherwise reported as not available
  tf_hvd_mpi        mpiexec -n 4 -hosts h1:2,h2:2 (MPICH's hydra over ssh)
  mwms_ring         MultiWorkerMirroredStrategy (RING), 2 workers per host, TF_CONFIG
                    naming the hosts' addresses

Parts: allreduce latency and bus bandwidth per size (in tf.function), Keras fit
throughput of the MLP (worker.py, allreduce_bench.py, training_bench.py as in
compare.py). Writes python/benchmarks/results/multihost.json.
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools"))

import allreduce_bench  # noqa: E402
import common  # noqa: E402
import launch  # noqa: E402
import netns_cluster  # noqa: E402
import training_bench  # noqa: E402

LAYOUT = "h1:2,h2:2"
NP = 4
HIER_ENV = {"HOROVOD_HIERARCHICAL_ALLREDUCE": "1", "HOROVOD_HIERARCHICAL_ALLGATHER": "1"}
MWMS_PORT = 23456


def _knob_known(name):
    try:
        from tf_hvd import _hvd  # noqa: F401  (loads TensorFlow: only the driver does this)
        return any(k.get("name") == name if isinstance(k, dict) else name in str(k)
                   for k in _hvd.knobs())
    except Exception:  # noqa: BLE001 - an old library: the knob is unknown
        return False


def contenders():
    cs = [launch.Contender("tf_hvd_gloo", "hvd", "tf_hvd Gloo flat",
                           "tfhvdrun -np 4 -H %s (Gloo, flat allreduce)" % LAYOUT, NP),
          launch.Contender("tf_hvd_gloo_hier", "hvd", "tf_hvd Gloo hierarchical",
                           "tfhvdrun -np 4 -H %s with %s" % (LAYOUT, HIER_ENV), NP,
                           HIER_ENV),
          launch.Contender("tf_hvd_mpi", "hvd", "tf_hvd MPI",
                           "mpiexec -n 4 -hosts %s (MPICH hydra over ssh)" % LAYOUT, NP),
          launch.Contender("mwms_ring", "mwms", "MWMS (RING)",
                           "MultiWorkerMirroredStrategy RING, 2 workers per host", NP)]
    return cs


def commands_on(cluster):
    """launch._commands for the cluster: every process starts inside a host."""
    py = sys.executable

    def commands(contender, worker_args, hvd_launcher_args):
        worker = [py, launch.WORKER_PY] + worker_args
        if contender.name.startswith("tf_hvd_gloo"):
            return [(cluster.exec_argv("h1", [py, "-m", "tf_hvd.runner", "-np", str(NP),
                                              "-H", LAYOUT] + worker), {}, "")]
        if contender.name == "tf_hvd_mpi":
            return [(cluster.exec_argv("h1", [launch.find_mpiexec(), "-n", str(NP),
                                              "-hosts", LAYOUT] + worker),
                     {"HOROVOD_CONTROLLER": "mpi"}, "")]
        hosts = [h for h, n in (e.split(":") for e in LAYOUT.split(",")) for _ in range(int(n))]
        workers = ["%s:%d" % (cluster.address(h), MWMS_PORT + i) for i, h in enumerate(hosts)]
        runs = []
        for index, host in enumerate(hosts):
            tf_config = {"cluster": {"worker": workers},
                         "task": {"type": "worker", "index": index}}
            env = {"TF_CONFIG": json.dumps(tf_config), "no_grpc_proxy": "1",
                   "NO_PROXY": "*", "no_proxy": "*"}
            runs.append((cluster.exec_argv(host, worker), env, ".w%d" % index))
        return runs

    return commands


def summarize(runs):
    out = {}
    for name, run in runs.items():
        result = run.get("result") or {}
        parts = result.get("parts") or {}
        entry = {"status": run["status"], "error": run.get("error"),
                 "loadavg_1min": run.get("loadavg_1min"), "allreduce": {}, "training": {}}
        for rec in parts.get("allreduce", []):
            entry["allreduce"][common.human_bytes(rec["bytes"])] = {
                "mode": rec["mode"], "latency_us_median": rec["latency_us"]["median"],
                "busbw_gbps": rec["busbw_gbps"], "correct": rec.get("correct")}
        for rec in parts.get("training", []):
            entry["training"]["%s/%s" % (rec["model"], rec["mode"])] = {
                "samples_per_s": rec["samples_per_s"]}
        out[name] = entry
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--rate-mbit", type=float, default=1000.0)
    p.add_argument("--delay-ms", type=float, default=0.2)
    p.add_argument("--sizes", default="4K,1M,16M,64M")
    p.add_argument("--contenders", default="tf_hvd_gloo,tf_hvd_gloo_hier,tf_hvd_mpi,mwms_ring")
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--results-dir", default=common.DEFAULT_RESULTS_DIR)
    p.add_argument("--tag", default="multihost")
    args = p.parse_args(argv)
    reason = netns_cluster.Cluster.available()
    if reason:
        raise SystemExit("multihost_bench: cannot make the namespace cluster: %s" % reason)
    sizes = common.parse_list(args.sizes, common.parse_size)
    configs = {"allreduce": allreduce_bench.make_config(sizes, ["function"], args.quick),
               "training": training_bench.make_config(args.quick, models=["mlp"],
                                                      modes=["fit"])}
    configs["training"]["reference_workers"] = NP
    hier_known = _knob_known("HOROVOD_HIERARCHICAL_ALLREDUCE")
    chosen = common.parse_list(args.contenders)
    results_dir = common.ensure_dir(os.path.abspath(args.results_dir))
    runs, notes = {}, []
    with netns_cluster.Cluster(2, name="tfhb", rate_mbit=args.rate_mbit,
                               delay_ms=args.delay_ms) as cluster:
        launch._commands = commands_on(cluster)
        for c in contenders():
            if c.name not in chosen:
                continue
            if c.name == "tf_hvd_gloo_hier" and not hier_known:
                notes.append("tf_hvd_gloo_hier not run: this library has no "
                             "HOROVOD_HIERARCHICAL_ALLREDUCE knob yet")
                continue
            names = [n for n, m in (("allreduce", allreduce_bench),
                                    ("training", training_bench)) if c.kind in m.KINDS]
            common.log("[multihost] %s ..." % c.name)
            runs[c.name] = launch.run_contender(
                c, names, dict((n, configs[n]) for n in names),
                os.path.join(results_dir, "runs"), os.path.join(results_dir, "logs"),
                args.timeout, args.tag)
            common.log("[multihost] %s %s in %ss %s" % (c.name, runs[c.name]["status"],
                                                         runs[c.name]["seconds"],
                                                         runs[c.name]["error"] or ""))
        shaping = cluster.shaping()
    summary = {"benchmark": "multihost", "layout": LAYOUT, "link": shaping,
               "requested_link": {"rate_mbit": args.rate_mbit, "delay_ms": args.delay_ms},
               "config": configs, "notes": notes, "results": summarize(runs),
               "machine": {"cpus": os.cpu_count(), "loadavg_end": os.getloadavg()},
               "commit": common.git_revision(), "machine_info": common.machine_info()}
    path = os.path.join(results_dir, "%s.json" % args.tag)
    common.write_json(path, summary)
    common.log("wrote %s" % path)
    print(json.dumps(summary["results"], indent=1))
    return 0 if all(r["status"] == "ok" for r in runs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

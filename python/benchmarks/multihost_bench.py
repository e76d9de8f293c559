"""tf_hvd across two hosts over a shaped link: flat against hierarchical collectives,
and against MultiWorkerMirroredStrategy, in one run.

    sudo python python/benchmarks/multihost_bench.py --quick      # ~5 min on 2 busy cores
    python python/benchmarks/multihost_bench.py [--rate-mbit 1000] [--delay-ms 0.2]
        [--sizes 4K,1M,64M] [--contenders tf_hvd_gloo,tf_hvd_gloo_hier,...]

Needs root: it makes a namespace cluster (tools/clusters/netns_cluster.py) of 2 hosts with the
link between them shaped (tbf rate; netem delay only where the kernel has netem: the
JSON's "link" says what was applied), runs every contender with 2 ranks on each host,
and tears the cluster down. Contenders, one after the other in one run:

  tf_hvd_gloo       tfhvdrun -np 4 -H h1:2,h2:2 (flat: Gloo's allgather, the ring/gather
                    allreduce over all 4 ranks)
  tf_hvd_gloo_hier  the same with HOROVOD_HIERARCHICAL_ALLREDUCE=1 and
                    HOROVOD_HIERARCHICAL_ALLGATHER=1 (reduce on the host, allreduce across
                    hosts, share on the host; allgather across hosts, then on the host)
  tf_hvd_mpi        mpiexec -n 4 -hosts h1:2,h2:2 (MPICH's hydra over ssh)
  tf_hvd_mpi_hier   the same with the hierarchical knobs
  mwms_ring         MultiWorkerMirroredStrategy (RING), 2 workers per host, TF_CONFIG
                    naming the hosts' addresses (allreduce and Keras fit; no allgather)

Parts: allreduce latency and bus bandwidth per size (in tf.function, allreduce_bench.py),
allgather latency and bus bandwidth per gathered size (allgather_bench.py), Keras fit
throughput of the MLP (training_bench.py). Every tf_hvd contender records the core's
per-algorithm counters, so the JSON shows that the hierarchical contender ran the
hierarchical algorithms. Writes python/benchmarks/results/multihost.json, with a
"hierarchical_vs_flat" table (latency ratios and throughputs side by side).

Engines (``--engines``): on the same shaped cluster, the same Keras fit (engine_fit.py:
MLP, batch 64 per worker) started by tfhvdrun, by Slurm's srun (a real slurmctld and a
slurmd per host) and by tf_hvd.ray.RayExecutor (a Ray head on h1, a worker node on h2),
interleaved in rounds, one job per contender per round (engine_bench.py); throughput is
measured inside the ranks after warm-up, start-up apart. The JSON's "engines" part has
the medians, spreads, engine/tfhvdrun ratios and the load average of every run:

    sudo python python/benchmarks/multihost_bench.py --quick --contenders '' --engines \
        --tag multihost_engines
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools", "clusters"))

import allgather_bench  # noqa: E402
import allreduce_bench  # noqa: E402
from lib import formats, jsonio, launch, machine, paths, tables  # noqa: E402
import engine_bench  # noqa: E402
import netns_cluster  # noqa: E402
import training_bench  # noqa: E402

LAYOUT = "h1:2,h2:2"
NP = 4
HIER_ENV = {"HOROVOD_HIERARCHICAL_ALLREDUCE": "1", "HOROVOD_HIERARCHICAL_ALLGATHER": "1"}
MWMS_PORT = 23456
# Checked on this project's VM (MPICH 5.0.2, FI_PROVIDER unset or tcp): mpi4py Sendrecv of
# 32 MiB between a rank on h1 and one on h2 takes ~0.02 s (1.4-1.7 GB/s) with a 1 Gbit/s
# tbf on the link, i.e. MPICH carries point-to-point messages between the namespace hosts
# past the shaped veth link (they share one kernel and /dev/shm).
MPI_NOTE = ("MPI figures are not over the shaped link: MPICH moves point-to-point messages "
            "between the namespace hosts at 1.4-1.7 GB/s (mpi4py Sendrecv of 32 MiB h1<->h2 "
            "under a 1 Gbit/s tbf, checked separately), so only the Gloo and MWMS figures "
            "are limited by the 1 Gbit/s link")


def contenders():
    hier = "%s" % " ".join("%s=1" % k for k in sorted(HIER_ENV))
    return [launch.Contender("tf_hvd_gloo", "hvd", "tf_hvd Gloo flat",
                             "tfhvdrun -np 4 -H %s (Gloo, flat algorithms)" % LAYOUT, NP),
            launch.Contender("tf_hvd_gloo_hier", "hvd", "tf_hvd Gloo hierarchical",
                             "%s tfhvdrun -np 4 -H %s" % (hier, LAYOUT), NP, HIER_ENV),
            launch.Contender("tf_hvd_mpi", "hvd", "tf_hvd MPI",
                             "mpiexec -n 4 -hosts %s (MPICH hydra over ssh)" % LAYOUT, NP),
            launch.Contender("tf_hvd_mpi_hier", "hvd", "tf_hvd MPI hierarchical",
                             "%s mpiexec -n 4 -hosts %s" % (hier, LAYOUT), NP, HIER_ENV),
            launch.Contender("mwms_ring", "mwms", "MWMS (RING)",
                             "MultiWorkerMirroredStrategy RING, 2 workers per host", NP)]


def commands_on(cluster):
    """launch._commands for the cluster: every process starts inside a host."""
    py = sys.executable

    def commands(contender, worker_args, hvd_launcher_args):
        worker = [py, launch.WORKER_PY] + worker_args
        if contender.name.startswith("tf_hvd_gloo"):
            return [(cluster.exec_argv("h1", [py, "-m", "tf_hvd.runner", "-np", str(NP),
                                              "-H", LAYOUT] + worker), {}, "")]
        if contender.name.startswith("tf_hvd_mpi"):
            return [(cluster.exec_argv("h1", [launch.find_mpiexec(), "-n", str(NP),
                                              "-hosts", LAYOUT] + worker),
                     {"HOROVOD_CONTROLLER": "mpi"}, "")]
        hosts = [h for h, n in (e.split(":") for e in LAYOUT.split(",")) for _ in range(int(n))]
        return mwms_runs(cluster, hosts, [MWMS_PORT + i for i in range(len(hosts))], worker)

    return commands


def mwms_runs(cluster, hosts, ports, worker):
    """One MultiWorkerMirroredStrategy worker per entry of ``hosts`` (on that host, listening
    on the matching entry of ``ports``), each with a TF_CONFIG naming every worker:
    [(argv, env, log suffix), ...] for the runner of ``launch``."""
    workers = ["%s:%d" % (cluster.address(h), p) for h, p in zip(hosts, ports)]
    runs = []
    for index, host in enumerate(hosts):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        env = {"TF_CONFIG": json.dumps(tf_config), "no_grpc_proxy": "1",
               "NO_PROXY": "*", "no_proxy": "*"}
        runs.append((cluster.exec_argv(host, worker), env, ".w%d" % index))
    return runs


def _latency_table(records):
    return dict((formats.human_bytes(rec["bytes"]), {
        "mode": rec["mode"], "latency_us_median": rec["latency_us"]["median"],
        "latency_us_min": rec["latency_us"]["min"], "busbw_gbps": rec["busbw_gbps"],
        "correct": rec.get("correct")}) for rec in records)


def summarize(runs):
    out = {}
    for name, run in runs.items():
        result = run.get("result") or {}
        parts = result.get("parts") or {}
        entry = {"status": run["status"], "error": run.get("error"),
                 "loadavg_1min": run.get("loadavg_1min"),
                 "allreduce": _latency_table(parts.get("allreduce", [])),
                 "allgather": _latency_table(parts.get("allgather", [])),
                 "training": {}, "algorithm_counts_rank0": result.get("algorithm_counts")}
        for rec in parts.get("training", []):
            entry["training"]["%s/%s" % (rec["model"], rec["mode"])] = {
                "samples_per_s": rec["samples_per_s"]}
        out[name] = entry
    return out


def compare(results, flat, hier):
    """hierarchical / flat per size and part (latency ratio < 1: hierarchical is faster),
    and Keras fit throughput side by side."""
    if flat not in results or hier not in results:
        return None
    a, b = results[flat], results[hier]
    table = {"flat": flat, "hierarchical": hier}
    for part in ("allreduce", "allgather"):
        rows = {}
        for size, fr in a[part].items():
            hr = b[part].get(size)
            if not hr or not fr["latency_us_median"] or not hr["latency_us_median"]:
                continue
            rows[size] = {"flat_us": round(fr["latency_us_median"], 1),
                          "hierarchical_us": round(hr["latency_us_median"], 1),
                          "hierarchical_over_flat": round(
                              hr["latency_us_median"] / fr["latency_us_median"], 3),
                          "flat_busbw_gbps": fr["busbw_gbps"],
                          "hierarchical_busbw_gbps": hr["busbw_gbps"]}
        table[part] = rows
    table["training"] = dict((k, {"flat_samples_per_s": v["samples_per_s"],
                                  "hierarchical_samples_per_s":
                                      b["training"].get(k, {}).get("samples_per_s")})
                             for k, v in a["training"].items())
    counts = b.get("algorithm_counts_rank0") or {}
    table["hierarchical_ran"] = {
        "allreduce": counts.get("allreduce/hierarchical", 0) > 0,
        "allgather": counts.get("allgather/hierarchical", 0) > 0}
    return table


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer calls per size, shorter fit")
    p.add_argument("--rate-mbit", type=float, default=1000.0)
    p.add_argument("--delay-ms", type=float, default=0.2,
                   help="one-way delay between the hosts (netem; skipped, and said so, "
                        "where the kernel has no netem)")
    p.add_argument("--sizes", default="4K,1M,64M", help="allreduce and allgather sizes")
    p.add_argument("--contenders", default="tf_hvd_gloo,tf_hvd_gloo_hier,tf_hvd_mpi,"
                   "tf_hvd_mpi_hier,mwms_ring")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per contender")
    p.add_argument("--results-dir", default=paths.DEFAULT_RESULTS_DIR)
    p.add_argument("--tag", default="multihost")
    p.add_argument("--engines", action="store_true",
                   help="also run the engines part: tfhvdrun, Slurm and Ray in rounds")
    p.add_argument("--engine-rounds", type=int, default=None,
                   help="rounds of the engines part (default 3 with --quick, else 5)")
    p.add_argument("--engine-per-host", type=int, default=1,
                   help="ranks per host in the engines part (2 hosts)")
    p.add_argument("--engine-steps", type=int, default=None,
                   help="timed steps per fit (default 100 with --quick, else 300)")
    args = p.parse_args(argv)
    reason = netns_cluster.Cluster.available()
    if reason:
        raise SystemExit("multihost_bench: cannot make the namespace cluster: %s" % reason)
    sizes = formats.parse_list(args.sizes, formats.parse_size)
    configs = {"allreduce": allreduce_bench.make_config(sizes, ["function"], args.quick),
               "allgather": allgather_bench.make_config(sizes, args.quick),
               "training": training_bench.make_config(args.quick, models=["mlp"],
                                                      modes=["fit"])}
    configs["training"]["reference_workers"] = NP
    chosen = formats.parse_list(args.contenders)
    results_dir = paths.ensure_dir(os.path.abspath(args.results_dir))
    runs, notes, engines = {}, [], None
    load_start = os.getloadavg()
    with netns_cluster.Cluster(2, name="tfhb", rate_mbit=args.rate_mbit,
                               delay_ms=args.delay_ms) as cluster:
        launch._commands = commands_on(cluster)
        for c in contenders():
            if c.name not in chosen:
                continue
            names = [n for n, m in (("allreduce", allreduce_bench),
                                    ("allgather", allgather_bench),
                                    ("training", training_bench)) if c.kind in m.KINDS]
            tables.log("[multihost] %s ..." % c.name)
            runs[c.name] = launch.run_contender(
                c, names, dict((n, configs[n]) for n in names),
                os.path.join(results_dir, "runs"), os.path.join(results_dir, "logs"),
                args.timeout, args.tag)
            tables.log("[multihost] %s %s in %ss %s" % (c.name, runs[c.name]["status"],
                                                         runs[c.name]["seconds"],
                                                         runs[c.name]["error"] or ""))
        if args.engines:
            engines = run_engines(cluster, args, results_dir)
        shaping = cluster.shaping()
    if args.delay_ms and not shaping.get("delay_ms"):
        notes.append("no delay between the hosts: this kernel has no netem qdisc, so only "
                     "the tbf rate limit shapes the link")
    if any(name.startswith("tf_hvd_mpi") for name in runs):
        notes.append(MPI_NOTE)
    notes.append("contenders run one after the other on one machine (%d cores shared by "
                 "all ranks of both hosts); compare them within this run only" %
                 os.cpu_count())
    results = summarize(runs)
    summary = {"benchmark": "multihost", "layout": LAYOUT, "link": shaping,
               "requested_link": {"rate_mbit": args.rate_mbit, "delay_ms": args.delay_ms},
               "config": configs, "notes": notes, "results": results,
               "hierarchical_vs_flat": {
                   "gloo": compare(results, "tf_hvd_gloo", "tf_hvd_gloo_hier"),
                   "mpi": compare(results, "tf_hvd_mpi", "tf_hvd_mpi_hier")},
               "engines": engines,
               "machine": {"cpus": os.cpu_count(), "loadavg_start": load_start,
                           "loadavg_end": os.getloadavg()},
               "commit": machine.git_revision(), "machine_info": machine.machine_info()}
    path = os.path.join(results_dir, "%s.json" % args.tag)
    jsonio.write_json(path, summary)
    tables.log("wrote %s" % path)
    print(json.dumps({"hierarchical_vs_flat": summary["hierarchical_vs_flat"],
                      "training": dict((k, v["training"]) for k, v in results.items()),
                      "engines": engines and engines["summary"]}, indent=1))
    if engines:
        engine_bench.print_summary(engines["summary"])
    ok = all(r["status"] == "ok" for r in runs.values())
    return 0 if ok and (engines is None or engines["all_ok"]) else 1


def run_engines(cluster, args, results_dir):
    """The engines part on ``cluster`` (see engine_bench.py); returns its JSON part."""
    rounds = args.engine_rounds or (3 if args.quick else 5)
    config = engine_bench.make_config(args.quick, steps=args.engine_steps)
    log_dir = paths.ensure_dir(os.path.join(results_dir, "logs"))
    per_host = args.engine_per_host
    tables.log("[multihost] engines: %d rounds of %s, %d rank(s) per host"
               % (rounds, ", ".join(engine_bench.ENGINES), per_host))
    runs, setup = engine_bench.run_rounds(cluster, rounds, per_host, config, log_dir,
                                          args.timeout)
    layout = ",".join("%s:%d" % (h, per_host) for h in cluster.hosts)
    return {"np": 2 * per_host, "layout": layout, "rounds": rounds, "config": config,
            "order": list(engine_bench.ENGINES), "setup": setup,
            "summary": engine_bench.summarize(runs), "runs": runs,
            "all_ok": all(r["status"] == "ok" for r in runs),
            "measured": "rank 0's samples/s over the timed steps (global batch x steps / "
                        "wall time from the end of the last warm-up step), inside the rank",
            "start_up": "seconds from the orchestrator starting the engine's command to "
                        "hvd.init() done / to the first timed step (slowest rank); Ray's "
                        "includes the driver's ray.init() and executor.start(), not the "
                        "Ray cluster's own start (setup.ray_up_s), nor Slurm's daemons'"}


if __name__ == "__main__":
    sys.exit(main())

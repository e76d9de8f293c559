"""Gradient compression over a shaped link: the same Keras fit exchanging float32, float16
and bfloat16 gradients, with the no-communication bound beside them, in interleaved rounds.

    sudo python python/benchmarks/compression_bench.py [--rounds 5] [--model mlp]
        [--rate-mbit 1000] [--steps 60] [--tag compression]

Needs root: it makes a namespace cluster of 2 hosts (tools/clusters/netns_cluster.py) whose link is
shaped (tbf rate; netem delay where the kernel has it), runs one rank on each host, and
tears the cluster down. Contenders, one job each per round, in this order every round:

  none   tfhvdrun -np 2 -H h1:1,h2:1 engine_fit.py, gradients exchanged as float32
  bf16   the same with DistributedOptimizer(compression=hvd.Compression.bf16)
  fp16   the same with hvd.Compression.fp16 (Horovod's only compressor)
  bound  one rank alone on h1 (tfhvdrun -np 1): the same steps with no communication;
         its samples/s x 2 is what two ranks could reach if the exchange were free

The fit is engine_fit.py's (training_bench's MLP 784-512-512-10 or CNN, synthetic data,
SGD + momentum, batch 64 per worker); throughput is rank 0's samples/s over the timed steps,
measured inside the rank after warm-up. Writes results/<tag>.json with every run, the
median, min, max and spread per contender, and the ratio of each compressed contender's
median to float32's (and the median of the per-round ratios).
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools", "clusters"))

from lib import formats, jsonio, machine, paths, tables  # noqa: E402
import engine_bench  # noqa: E402
import engine_fit  # noqa: E402
import netns_cluster  # noqa: E402

CONTENDERS = ("none", "bf16", "fp16", "bound")


def run_once(cluster, contender, round_, config, log_dir, timeout):
    """One job; returns its record (rank 0's samples/s, the load before and after)."""
    np_ = 1 if contender == "bound" else 2
    config = dict(config, compression="none" if contender == "bound" else contender)
    py = sys.executable
    layout = "h1:1" if np_ == 1 else "h1:1,h2:1"
    argv = cluster.exec_argv("h1", [py, "-m", "tf_hvd.runner", "-np", str(np_), "-H", layout,
                                    py, engine_fit.__file__, "--config", json.dumps(config)])
    log = os.path.join(log_dir, "compression-%s-r%d.log" % (contender, round_))
    load_before = os.getloadavg()
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, env=engine_bench.job_env(), cwd=engine_bench.REPO,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            engine_bench._kill_group(proc)
            rc = "timeout"
    with open(log, errors="replace") as f:
        text = f.read()
    ranks = engine_fit.parse_results(text)
    ok = rc == 0 and len(ranks) == np_ and all(r["samples_per_s"] for r in ranks)
    rec = {"contender": contender, "round": round_, "rc": rc, "np": np_, "log": log,
           "status": "ok" if ok else "failed", "loadavg_before": load_before,
           "loadavg_after": os.getloadavg(), "ranks": ranks}
    if ok:
        rec["samples_per_s"] = ranks[0]["samples_per_s"] * (2 if np_ == 1 else 1)
        rec["step_ms_median"] = ranks[0]["step_ms_median"]
        rec["final_loss"] = ranks[0]["final_loss"]
    else:
        rec["output_tail"] = text[-3000:]
    tables.log("[compression] round %d %-5s %s %s samples/s (step %s ms), load %.2f"
               % (round_, contender, rec["status"], formats.fmt(rec.get("samples_per_s"), 5),
                  formats.fmt(rec.get("step_ms_median"), 3), load_before[0]))
    return rec


def summarize(runs):
    out = {}
    for c in CONTENDERS:
        ok = [r for r in runs if r["contender"] == c and r["status"] == "ok"]
        if not any(r["contender"] == c for r in runs):
            continue
        out[c] = {"runs_ok": len(ok), "samples_per_s": engine_bench._stats(
                      [r["samples_per_s"] for r in ok]),
                  "step_ms": engine_bench._stats([r["step_ms_median"] for r in ok]),
                  "per_round_samples_per_s": [round(r["samples_per_s"], 1) for r in ok]}
    base = (out.get("none") or {}).get("samples_per_s")
    by_round = dict(((r["contender"], r["round"]), r) for r in runs if r["status"] == "ok")
    for c, entry in out.items():
        if c == "none" or not base or not entry["samples_per_s"]:
            continue
        entry["ratio_to_float32"] = entry["samples_per_s"]["median"] / base["median"]
        entry["per_round_ratio"] = engine_bench._stats(
            [by_round[(c, n)]["samples_per_s"] / by_round[("none", n)]["samples_per_s"]
             for (k, n) in by_round if k == c and ("none", n) in by_round])
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--model", default="mlp", choices=["mlp", "cnn"])
    p.add_argument("--steps", type=int, default=60, help="timed steps per job")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--rate-mbit", type=float, default=1000.0)
    p.add_argument("--delay-ms", type=float, default=0.2)
    p.add_argument("--contenders", default=",".join(CONTENDERS))
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per job")
    p.add_argument("--results-dir", default=paths.DEFAULT_RESULTS_DIR)
    p.add_argument("--tag", default="compression")
    args = p.parse_args(argv)
    config = dict(engine_bench.make_config(False, steps=args.steps, warmup=args.warmup),
                  model=args.model)
    chosen = [c for c in CONTENDERS if c in formats.parse_list(args.contenders)]
    results_dir = paths.ensure_dir(os.path.abspath(args.results_dir))
    log_dir = paths.ensure_dir(os.path.join(results_dir, "logs"))
    runs, t0 = [], time.time()
    with netns_cluster.Cluster(2, name="tfcb", rate_mbit=args.rate_mbit,
                               delay_ms=args.delay_ms) as cluster:
        for n in range(args.rounds):
            for c in chosen:
                runs.append(run_once(cluster, c, n, config, log_dir, args.timeout))
        shaping = cluster.shaping()
    summary = {"benchmark": "compression", "layout": "h1:1,h2:1", "link": shaping,
               "config": config, "rounds": args.rounds, "order": chosen,
               "summary": summarize(runs), "runs": runs, "seconds": round(time.time() - t0),
               "measured": "rank 0's samples/s over the timed steps (global batch x steps / "
                           "wall time after warm-up), inside the rank; bound: one rank's x 2",
               "machine": {"cpus": os.cpu_count()}, "commit": machine.git_revision(),
               "machine_info": machine.machine_info()}
    path = os.path.join(results_dir, "%s.json" % args.tag)
    jsonio.write_json(path, summary)
    tables.log("wrote %s" % path)
    print(json.dumps(summary["summary"], indent=1))
    return 0 if all(r["status"] == "ok" for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())

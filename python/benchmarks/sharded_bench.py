"""Keras fit with the sharded DistributedOptimizer against the unsharded one, np=2.

    python python/benchmarks/sharded_bench.py [--rounds 5] [--models mlp,cnn] [--np 2]
                                              [--optimizer adam|sgd] [--quick]

One job of N ranks (tf_hvd's launcher, Gloo) trains training_bench.py's MLP
(784-512-512-10) and CNN on synthetic data with model.fit, batch 64 per rank,
Adam by default (two slots per parameter: the state sharding divides), with
``hvd.DistributedOptimizer(opt)`` and ``hvd.DistributedOptimizer(opt, sharded=True)``
in interleaved rounds: in round k both variants of every model run one after the
other in the same processes, forward order in even rounds and backward in odd
ones (rounds.round_order), each from a fresh Keras session with the same initial
weights, warm-up steps and then timed steps (training_bench's step windows:
800 for the MLP, 200 for the CNN; a quarter with --quick). Throughput is the
global batch x timed steps / wall time of those steps on rank 0. The ratio
sharded / unsharded is taken per round, so drift between rounds stays out of it;
the verdict is against 0.95.
Writes <results>/sharded.json.

With ``--hosts K`` (root) the job runs on K namespace hosts (tools/clusters/netns_cluster.py), one
rank each, their links shaped to ``--rate-mbit`` (default 1000), started from h1; the
results go to sharded-<K>hosts.json.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from lib import rounds  # noqa: E402
import training_bench  # noqa: E402

VARIANTS = ("unsharded", "sharded")
TARGET = 0.95


def _optimizer(keras, name, size):
    if name == "sgd":
        return keras.optimizers.SGD(0.01 * size, momentum=0.9)
    return keras.optimizers.Adam(1e-3 * size)


def worker(args):
    import keras
    import tensorflow as tf
    import tf_hvd.keras as hvd
    hvd.init()
    size, rank = hvd.size(), hvd.rank()
    records = []
    for index in range(args.rounds):
        for model_name in args.models:
            steps = args.steps * training_bench.MODEL_STEP_FACTOR.get(model_name, 1)
            total = args.warmup + steps
            for variant in rounds.round_order(VARIANTS, index):
                keras.backend.clear_session()
                keras.utils.set_random_seed(1234)
                ds = training_bench.dataset(tf, model_name, args.batch, seed=100 + rank)
                model = training_bench.build_model(model_name)
                opt = hvd.DistributedOptimizer(_optimizer(keras, args.optimizer, size),
                                               sharded=variant == "sharded")
                times = training_bench._StepTimes()
                model.compile(optimizer=opt, loss=training_bench._loss(keras))
                hvd.allreduce(tf.zeros([1]), name="sharded_bench_barrier")
                history = model.fit(
                    ds, steps_per_epoch=total, epochs=1, verbose=0,
                    callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                               training_bench._keras_timer(keras, times)])
                rate, durations = times.summary(args.warmup, steps, args.batch * size)
                held = sum(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize
                           for v in opt.variables)
                rec = {"round": index + 1, "model": model_name, "variant": variant,
                       "samples_per_s": rate, "steps": steps, "workers": size,
                       "median_step_ms": float(np.median(durations)) * 1e3,
                       "optimizer_state_bytes": held,
                       "final_loss": float(history.history["loss"][-1])}
                records.append(rec)
                if rank == 0:
                    print("round %d %-4s %-9s %9.0f samples/s  median step %6.2f ms  "
                          "state %d bytes" % (index + 1, model_name, variant, rate,
                                              rec["median_step_ms"], held), flush=True)
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump(records, f)


def summarize(records, models):
    out = {}
    for model in models:
        ratios = []
        for index in sorted(set(r["round"] for r in records)):
            by = dict((r["variant"], r["samples_per_s"]) for r in records
                      if r["model"] == model and r["round"] == index)
            ratios.append(by["sharded"] / by["unsharded"]
                          if by.get("sharded") and by.get("unsharded") else None)
        rates = dict((v, rounds.spread([r["samples_per_s"] for r in records
                                        if r["model"] == model and r["variant"] == v]))
                     for v in VARIANTS)
        out[model] = {"ratio_sharded_over_unsharded": rounds.spread(ratios),
                      "verdict_vs_%.2f" % TARGET: rounds.verdict(ratios, ">=", TARGET),
                      "samples_per_s": rates}
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--optimizer", choices=("adam", "sgd"), default="adam")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=None,
                        help="timed steps (x4 for the MLP); default 200, 50 with --quick")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--hosts", type=int, default=0,
                        help="run on this many shaped namespace hosts, one rank each")
    parser.add_argument("--rate-mbit", type=float, default=1000.0)
    parser.add_argument("--results", default=os.path.join(HERE, "results"))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.models = [m for m in args.models.split(",") if m]
    args.steps = args.steps or (50 if args.quick else 200)
    if args.worker:
        return worker(args)
    fd, out = tempfile.mkstemp(suffix=".json", prefix="sharded_bench_")
    os.close(fd)
    cmd = [sys.executable, "-m", "tf_hvd.runner", "-np", str(args.np), sys.executable,
           os.path.abspath(__file__), "--worker", "--out", out,
           "--rounds", str(args.rounds), "--models", ",".join(args.models),
           "--optimizer", args.optimizer, "--batch", str(args.batch),
           "--steps", str(args.steps), "--warmup", str(args.warmup)]
    started = time.time()
    link = None
    if args.hosts:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools",
                                        "clusters"))
        import netns_cluster
        args.np = args.hosts
        cmd[4] = str(args.np)
        with netns_cluster.Cluster(args.hosts, name="tfsb", rate_mbit=args.rate_mbit) as c:
            layout = ",".join("%s:1" % h for h in c.hosts)
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(
                [os.path.dirname(os.path.dirname(HERE)), HERE]))
            subprocess.run(c.exec_argv("h1", cmd[:5] + ["-H", layout] + cmd[5:]), check=True,
                           env=env, cwd=os.path.dirname(os.path.dirname(HERE)))
            link = c.shaping()
    else:
        subprocess.run(cmd, check=True)
    with open(out) as f:
        records = json.load(f)
    os.unlink(out)
    summary = summarize(records, args.models)
    result = {"benchmark": "sharded", "np": args.np, "hosts": args.hosts or 1, "link": link,
              "rounds": args.rounds,
              "optimizer": args.optimizer, "batch_per_worker": args.batch,
              "steps": args.steps, "warmup": args.warmup, "quick": args.quick,
              "seconds": time.time() - started, "summary": summary, "records": records}
    os.makedirs(args.results, exist_ok=True)
    path = os.path.join(args.results, "sharded-%dhosts.json" % args.hosts if args.hosts
                        else "sharded.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    for model, s in summary.items():
        print("%-4s sharded / unsharded samples/s: %s (%s rounds), %s vs %.2f"
              % (model, rounds.fmt_spread(s["ratio_sharded_over_unsharded"]),
                 s["ratio_sharded_over_unsharded"]["n"], s["verdict_vs_%.2f" % TARGET],
                 TARGET))
    print("wrote %s" % path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

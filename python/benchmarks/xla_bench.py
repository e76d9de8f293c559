"""Keras fit with XLA (model.compile(jit_compile=True)) against without, side by
side in one tf_hvd job: samples per second of the MLP of training_bench.py
(784-512-512-10, SGD with momentum, batch 64 per worker, synthetic data).

    python python/benchmarks/xla_bench.py [--np 2] [--rounds 5] [--steps 60] [--mpi]

Both models are built and compiled once per rank; then the rounds alternate
fit(jit_compile=False) and fit(jit_compile=True) for --steps steps each, so load
on the machine hits both alike. The first round is a warm-up (tracing and XLA
compilation) and not counted; inside a round the first 3 steps are not timed.
Throughput counts all workers' samples. Rank 0 writes
<results>/xla.json with every round's figures, the medians and the spread.
"""

import argparse
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from lib import jsonio, paths, tables  # noqa: E402
import training_bench as tb  # noqa: E402

SKIP = 3  # steps of a round not timed


def worker(args):
    import keras
    import tensorflow as tf
    import tf_hvd.keras as hvd
    hvd.init()
    size, rank = hvd.size(), hvd.rank()
    header = jsonio.run_header("xla", args)  # the load at the start
    cfg = tb.make_config(quick=False)
    ds = tb.dataset(tf, "mlp", args.batch, seed=100 + rank)
    models = {}
    for jit in (False, True):
        keras.utils.set_random_seed(1234)
        model = tb.build_model("mlp")
        opt = hvd.DistributedOptimizer(tb._sgd(keras, cfg, size))
        model.compile(optimizer=opt, loss=tb._loss(keras), jit_compile=jit)
        models[jit] = model
    rounds = {False: [], True: []}
    for r in range(args.rounds + 1):
        for jit in (False, True):
            times = tb._StepTimes()
            models[jit].fit(ds, steps_per_epoch=args.steps, epochs=1, verbose=0,
                            callbacks=[tb._keras_timer(keras, times)])
            stamps = times.stamps[SKIP - 1:]
            rate = (len(stamps) - 1) * args.batch * size / (stamps[-1] - stamps[0])
            if r > 0:
                rounds[jit].append(rate)
            if rank == 0:
                print("round %d jit_compile=%-5s %8.0f samples/s%s" % (
                    r, jit, rate, " (warm-up)" if r == 0 else ""), flush=True)
    if rank == 0:
        header["config"] = {"model": "mlp", "batch_per_worker": args.batch, "np": size,
                            "steps_per_round": args.steps, "untimed_steps": SKIP,
                            "rounds": args.rounds,
                            "transport": "mpi" if args.mpi else "gloo"}
        results = {}
        for jit in (False, True):
            xs = rounds[jit]
            results["jit_compile=%s" % jit] = {
                "samples_per_s": xs, "median": float(np.median(xs)),
                "min": float(min(xs)), "max": float(max(xs))}
        results["ratio_xla_over_plain_median"] = (
            results["jit_compile=True"]["median"] / results["jit_compile=False"]["median"])
        # Per round (the two fits ran back to back under the same load).
        results["ratio_per_round"] = [b / a for a, b in zip(rounds[False], rounds[True])]
        header["results"] = results
        jsonio.finish_header(header)
        path = os.path.join(paths.ensure_dir(args.results_dir), args.tag + ".json")
        jsonio.write_json(path, header)
        print("median samples/s: jit_compile=False %.0f, True %.0f (XLA/plain %.2fx, "
              "per round %s); load %s -> %s; wrote %s" % (
                  results["jit_compile=False"]["median"], results["jit_compile=True"]["median"],
                  results["ratio_xla_over_plain_median"],
                  ", ".join("%.2f" % x for x in results["ratio_per_round"]),
                  header["machine"]["loadavg"], header["machine"]["loadavg_end"], path))
    hvd.shutdown()
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--mpi", action="store_true", help="MPI instead of Gloo")
    p.add_argument("--results-dir", default=os.path.join(HERE, "results"))
    p.add_argument("--tag", default="xla")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args)
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("PYTHONUNBUFFERED", "1")
    cmd = [sys.executable, "-m", "tf_hvd.runner", "-np", str(args.np)]
    cmd += ["--mpi"] if args.mpi else ["--gloo"]
    cmd += [sys.executable, os.path.abspath(__file__), "--worker"] + [
        a for a in (argv if argv is not None else sys.argv[1:])]
    t0 = time.time()
    code = subprocess.call(cmd, env=env)
    tables.log("xla_bench: job ended with code %d after %.0fs" % (code, time.time() - t0))
    return code


if __name__ == "__main__":
    sys.exit(main())

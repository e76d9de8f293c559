"""Soak test: a long training run must not leak memory or file descriptors.

    python -m tf_hvd.runner -np 2 python python/benchmarks/soak.py \
        [--steps 20000] [--tensors 200] [--warmup 2000] [--json soak.json]

Every rank trains a model with ``--tensors`` variables (their sizes spread from 16 to
4096 floats, so the fusion buffer packs many tensors of different sizes per step)
with ``hvd.DistributedGradientTape`` inside a ``tf.function`` for ``--steps`` steps.
After ``--warmup`` steps (TensorFlow's and the core's caches, pools and buffers have
reached their steady size by then) it notes the resident memory (VmRSS in
/proc/self/status) and the number of open file descriptors (/proc/self/fd), and
samples both every ``--sample-every`` steps until the end.

Each rank prints one line, e.g.::

    soak rank 0: 20000 steps x 200 tensors, 2.9 ms/step | RSS after warm-up 701.2 MiB,
    at end 702.0 MiB (+0.11%), highest 703.1 MiB (+0.27%) | open fds 31 -> 31 (max 31) | PASS

and rank 0 a verdict for the job. A rank passes when its highest RSS after warm-up is
less than ``--max-growth`` (default 5%) above the warm-up value and it has no more
file descriptors open at the end than after warm-up. The exit status is 0 only if
every rank passes (and the ranks' weights agree, a check that the steps really ran).
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import tensorflow as tf

import tf_hvd as hvd

MiB = 1024.0 * 1024.0


def rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def open_fds():
    return len(os.listdir("/proc/self/fd"))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20000)
    p.add_argument("--tensors", type=int, default=200)
    p.add_argument("--warmup", type=int, default=2000)
    p.add_argument("--sample-every", type=int, default=250)
    p.add_argument("--report-every", type=int, default=2000,
                   help="rank 0 prints progress every this many steps")
    p.add_argument("--max-growth", type=float, default=5.0, help="percent")
    p.add_argument("--json", help="rank 0 writes the results of every rank here")
    args = p.parse_args(argv)
    if not 0 < args.warmup < args.steps:
        p.error("--warmup must be between 0 and --steps")
    return args


def build_model(num_tensors, seed=0):
    rng = np.random.RandomState(seed)
    sizes = np.geomspace(16, 4096, num_tensors).astype(int)
    variables, targets = [], []
    for i, n in enumerate(sizes):
        shape = (int(n),) if i % 2 == 0 else (int(n) // 8, 8) if n >= 8 else (int(n),)
        variables.append(tf.Variable(rng.randn(*shape).astype(np.float32), name="v%d" % i))
        targets.append(tf.constant(rng.randn(*shape).astype(np.float32)))
    return variables, targets


def make_step(variables, targets, lr):
    @tf.function
    def step(scale):
        with tf.GradientTape() as tape:
            loss = tf.add_n([tf.reduce_mean(tf.square(v - scale * t))
                             for v, t in zip(variables, targets)])
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, variables)
        for v, g in zip(variables, grads):
            v.assign_sub(lr * g)
        return loss
    return step


def main(argv=None):
    args = parse_args(argv)
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    variables, targets = build_model(args.tensors)
    step = make_step(variables, targets, lr=0.01)
    # Every rank pulls towards a slightly different target: the averaged gradient is
    # what keeps the ranks' weights identical.
    scale = tf.constant(1.0 + 0.1 * rank)

    rss_warm = fds_warm = None
    rss_max = fds_max = 0
    t_warm = None
    t0 = time.monotonic()
    for i in range(1, args.steps + 1):
        loss = step(scale)
        if i == args.warmup:
            float(loss)  # wait for the step to finish before measuring
            rss_warm, fds_warm = rss_bytes(), open_fds()
            rss_max, fds_max = rss_warm, fds_warm
            t_warm = time.monotonic()
        elif i > args.warmup and i % args.sample_every == 0:
            rss_max = max(rss_max, rss_bytes())
            fds_max = max(fds_max, open_fds())
        if rank == 0 and i % args.report_every == 0:
            print("soak: step %d/%d, loss %.4f, RSS %.1f MiB, %d fds, %.1f s"
                  % (i, args.steps, float(loss), rss_bytes() / MiB, open_fds(),
                     time.monotonic() - t0), flush=True)
    float(loss)
    rss_end, fds_end = rss_bytes(), open_fds()
    rss_max, fds_max = max(rss_max, rss_end), max(fds_max, fds_end)
    ms_per_step = (time.monotonic() - t_warm) * 1000.0 / (args.steps - args.warmup)

    growth_end = 100.0 * (rss_end - rss_warm) / rss_warm
    growth_max = 100.0 * (rss_max - rss_warm) / rss_warm
    passed = growth_max < args.max_growth and fds_end <= fds_warm
    print("soak rank %d: %d steps x %d tensors, %.1f ms/step | RSS after warm-up %.1f MiB, "
          "at end %.1f MiB (%+.2f%%), highest %.1f MiB (%+.2f%%) | open fds %d -> %d "
          "(max %d) | %s"
          % (rank, args.steps, args.tensors, ms_per_step, rss_warm / MiB, rss_end / MiB,
             growth_end, rss_max / MiB, growth_max, fds_warm, fds_end, fds_max,
             "PASS" if passed else "FAIL"), flush=True)

    # Gather every rank's numbers and a checksum of its weights on every rank.
    checksum = float(sum(float(tf.reduce_sum(v)) for v in variables))
    mine = tf.constant([[rss_warm, rss_end, rss_max, fds_warm, fds_end, fds_max,
                         ms_per_step, float(passed), checksum]], tf.float64)
    table = hvd.allgather(mine, name="soak_results").numpy()
    same_weights = bool(np.all(table[:, 8] == table[0, 8]))
    all_passed = bool(np.all(table[:, 7] == 1.0)) and same_weights
    if rank == 0:
        print("soak: %d ranks, %d steps, %d gradient tensors: RSS growth after warm-up "
              "at most %+.2f%% (limit %.1f%%), fd growth at most %+d, weights %s -> %s"
              % (size, args.steps, args.tensors,
                 float(np.max(100.0 * (table[:, 2] - table[:, 0]) / table[:, 0])),
                 args.max_growth, int(np.max(table[:, 4] - table[:, 3])),
                 "identical on every rank" if same_weights else "DIFFER between ranks",
                 "PASS" if all_passed else "FAIL"), flush=True)
        if args.json:
            ranks = []
            for r, row in enumerate(table):
                ranks.append({
                    "rank": r, "rss_after_warmup": int(row[0]), "rss_end": int(row[1]),
                    "rss_max": int(row[2]), "fds_after_warmup": int(row[3]),
                    "fds_end": int(row[4]), "fds_max": int(row[5]),
                    "ms_per_step": float(row[6]), "passed": bool(row[7]),
                    "rss_growth_pct": 100.0 * (row[2] - row[0]) / row[0],
                })
            with open(args.json, "w") as f:
                json.dump({"size": size, "steps": args.steps, "tensors": args.tensors,
                           "warmup": args.warmup, "max_growth_pct": args.max_growth,
                           "same_weights": same_weights, "passed": all_passed,
                           "ranks": ranks}, f, indent=2)
    hvd.shutdown()
    return 0 if all_passed else 1


if __name__ == "__main__":
    sys.exit(main())

"""Where a data-parallel training step's time goes: the same step with and without
its communication, in the same processes, interleaved in rounds.

    python python/benchmarks/step_cost.py [--model mlp|cnn] [--np 2] [--mpi] [--rounds 7]

Launches `tfhvdrun -np N` (Gloo, or `--mpi`) of this file; every rank builds the
training benchmark's model (training_bench.build_model) and times these variants
of one step, each a tf.function on constant inputs (the input pipeline is left
out: on one core its iterator alone costs ~0.6 ms per MLP step, with or without
communication), round after round in the same order, a barrier before each:

  plain           forward, backward, SGD update; no communication (the bound)
  tape            hvd.DistributedGradientTape: one allreduce per gradient
  grouped         hvd.DistributedGradientTape(num_groups=1): one grouped allreduce
  in_step         plain plus one scalar allreduce in the step: what keeping the
                  ranks in step costs, without moving the gradients
  allreduce_only  a tf.function of the step's gradient allreduces on constants
  one_scalar      a tf.function of one scalar allreduce: the fixed cost of a call

Reports per variant the median and [min-max] over the rounds of ms per step on
rank 0 (every rank with --all-ranks), and per round plain/tape and plain/grouped
(the step rate against the bound). Writes <results>/step_cost-<model>-<transport>.json with
the machine record (memcpy GB/s, cores, load).
"""

import argparse
import json
import os
import subprocess
import sys
import time

from lib import formats, jsonio, machine, paths, rounds, tables

VARIANTS = ("plain", "tape", "grouped", "in_step", "allreduce_only", "one_scalar")


def _worker(args):
    import numpy as np
    import tensorflow as tf
    import keras
    import tf_hvd as hvd
    import training_bench

    hvd.init()
    keras.utils.set_random_seed(1234)
    model = training_bench.build_model(args.model)
    opt = keras.optimizers.SGD(learning_rate=0.01, momentum=0.9)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    x_np, y_np = training_bench.synthetic_arrays(args.model, args.batch, seed=100 + hvd.rank())
    x, y = tf.constant(x_np), tf.constant(y_np)

    def make_step(kind):
        @tf.function
        def step():
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            if kind == "tape":
                tape = hvd.DistributedGradientTape(tape)
            elif kind == "grouped":
                tape = hvd.DistributedGradientTape(tape, num_groups=1)
            grads = tape.gradient(loss, model.trainable_variables)
            if kind == "in_step":
                # zero times a real value: the update is unchanged, the step waits
                grads[-1] = grads[-1] + hvd.allreduce(tf.reduce_sum(grads[-1]) * 0.0,
                                                      name="in_step")
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        return step

    constants = [tf.constant(np.ones(v.shape, np.float32)) for v in model.trainable_variables]

    @tf.function
    def allreduce_only():
        return [hvd.allreduce(c, name="grad_%d" % i) for i, c in enumerate(constants)]

    @tf.function
    def one_scalar():
        return hvd.allreduce(tf.constant([1.0]), name="one_scalar")

    steps = {"plain": make_step("plain"), "tape": make_step("tape"),
             "grouped": make_step("grouped"), "in_step": make_step("in_step"),
             "allreduce_only": allreduce_only, "one_scalar": one_scalar}
    variants = [v for v in args.variants if v in steps]
    for v in variants:  # trace and warm up
        for _ in range(args.warmup):
            steps[v]()
    hvd.broadcast_variables(model.variables, root_rank=0)
    ms = dict((v, []) for v in variants)
    for _ in range(args.rounds):
        for v in variants:
            hvd.allreduce(tf.constant(0.0), name="barrier")
            t0 = time.perf_counter()
            for _ in range(args.steps):
                out = steps[v]()
            for t in tf.nest.flatten(out):
                t.numpy()
            ms[v].append((time.perf_counter() - t0) / args.steps * 1e3)
    every = hvd.allgather_object(ms)
    if hvd.rank() == 0:
        with open(args.worker_out, "w") as f:
            json.dump(every, f)


def _ratios(plain, other):
    return [p / o for p, o in zip(plain, other) if p and o]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mlp", choices=("mlp", "cnn"))
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--mpi", action="store_true", help="tfhvdrun --mpi (default Gloo)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=150, help="steps per variant per round")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--all-ranks", action="store_true", help="print every rank")
    parser.add_argument("--results-dir", default=paths.DEFAULT_RESULTS_DIR)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--worker-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.variants = formats.parse_list(args.variants)
    if args.worker_out:
        sys.path.insert(0, paths.BENCH_DIR)
        _worker(args)
        return 0

    header = jsonio.run_header("step_cost", args)
    memcpy_start = machine.memcpy_gbps()
    out = os.path.join(paths.ensure_dir(args.results_dir), ".step_cost_ranks.json")
    cmd = [sys.executable, "-m", "tf_hvd.runner", "-np", str(args.np)]
    cmd += ["--mpi"] if args.mpi else []
    cmd += [sys.executable, os.path.abspath(__file__), "--worker-out", out]
    cmd += [a for a in (argv if argv is not None else sys.argv[1:])]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [paths.BENCH_DIR, os.environ.get("PYTHONPATH", "")]))
    subprocess.run(cmd, check=True, timeout=args.timeout, env=env)
    with open(out) as f:
        per_rank = json.load(f)
    os.remove(out)
    jsonio.finish_header(header)
    header["machine_record"] = machine.machine_record(header, memcpy_start, machine.memcpy_gbps())
    machine.log_machine_record(header["machine_record"])
    variants = [v for v in args.variants if v in per_rank[0]]
    result = dict(header)
    result["config"] = {"model": args.model, "transport": "mpi" if args.mpi else "gloo",
                        "rounds": args.rounds, "steps": args.steps, "batch": args.batch}
    result["ms_per_step"] = [dict((v, rounds.spread(r[v])) for v in variants) for r in per_rank]
    rank0 = per_rank[0]
    result["plain_over"] = dict((v, rounds.spread(_ratios(rank0["plain"], rank0[v])))
                                for v in ("tape", "grouped", "in_step")
                                if v in rank0 and "plain" in rank0)
    rows = []
    for rank, ranks_ms in enumerate(per_rank):
        if rank and not args.all_ranks:
            continue
        for v in variants:
            s = rounds.spread(ranks_ms[v])
            rows.append([rank, v, formats.fmt(s["median"]),
                         "[%s-%s]" % (formats.fmt(s["min"]), formats.fmt(s["max"]))])
    tables.print_table("ms per step, %s, np=%d, %s, %d rounds of %d steps"
                       % (args.model, args.np, result["config"]["transport"], args.rounds,
                          args.steps), ["rank", "variant", "median", "[min-max]"], rows)
    for v, s in result["plain_over"].items():
        tables.log("plain/%s (step rate against the bound): %s [%s-%s]"
                   % (v, formats.fmt(s["median"]), formats.fmt(s["min"]), formats.fmt(s["max"])))
    path = os.path.join(args.results_dir, "step_cost-%s-%s.json"
                        % (args.model, result["config"]["transport"]))
    jsonio.write_json(path, result)
    tables.log("wrote %s" % path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

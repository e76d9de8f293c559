"""Many gradient-sized tensors reduced together: steps per second.

    python python/benchmarks/fusion_bench.py [--quick] [--np 2]

One step = 200 tensors of 16 KiB plus 4 of 4 MiB (float32), all submitted at once
as a backward pass does, summed over N processes. Each contender reduces them the
ways it offers, and the best counts:

  tf_hvd        tf.function with one hvd.allreduce per tensor (what
                DistributedGradientTape / DistributedOptimizer emit; the core fuses
                them), tf.function with one hvd.grouped_allreduce, eager grouped_allreduce
  MWMS (RING)   tf.function: strategy.run + ReplicaContext.all_reduce of the whole list
                (MWMS packs the list itself)
  mpi4py        "packed": copy into one preallocated buffer, one Allreduce, copy out
                (manual fusion); "separate": one Allreduce per tensor

Every result is checked. Writes <results>/fusion.json and fusion.png.
"""

import argparse
import sys

import numpy as np

from lib import formats, launch, rounds, tables, timing
from lib import report as report_lib

PART = "fusion"
KINDS = ("hvd", "mwms", "mpi4py")
CONTENDERS = ("tf_hvd_gloo", "tf_hvd_mpi", "mwms_ring", "mpi4py", "mpi4py_malloc")
SMALL = (200, 16 * formats.KiB)
LARGE = (4, 4 * formats.MiB)

VARIANTS = {
    "hvd": ("function_ops", "function_grouped", "eager_grouped"),
    "mwms": ("function_batched",),
    "mpi4py": ("packed", "separate"),
}


def make_config(quick, small=SMALL, large=LARGE):
    # quick: fewer timed steps, the same warm-up (so its median is not biased)
    return {"small": list(small), "large": list(large), "quick": bool(quick),
            "warmup": 5, "steps": 15 if quick else 60}


def tensor_counts(cfg):
    """Element counts of the step's tensors, in submission order."""
    (n_small, b_small), (n_large, b_large) = cfg["small"], cfg["large"]
    return [b_small // 4] * n_small + [b_large // 4] * n_large


def rank_inputs(counts, rank):
    base = np.arange(251, dtype=np.float32)
    return [np.resize(base, c) + np.float32(i % 97 + rank + 1) for i, c in enumerate(counts)]


def expected_sums(counts, size):
    base = np.arange(251, dtype=np.float32)
    return [np.resize(base, c) * np.float32(size) + np.float32(size * (i % 97)
                                                              + size * (size + 1) // 2)
            for i, c in enumerate(counts)]


def check_all(results, expected):
    for i, (r, e) in enumerate(zip(results, expected)):
        r = np.asarray(r).reshape(-1)
        if r.shape != e.shape or not np.array_equal(r, e):
            return False, "tensor %d of %d differs from the expected sum" % (i, len(expected))
    if len(results) != len(expected):
        return False, "%d results for %d tensors" % (len(results), len(expected))
    return True, None


def _record(ctx, variant, cfg, counts, durations, resources, correct, message):
    stats = timing.summarize(durations)
    total = sum(counts) * 4
    rec = {"contender": ctx.contender, "variant": variant, "ranks": ctx.size,
           "tensors": len(counts), "bytes_per_step": total, "warmup": cfg["warmup"],
           "steps": len(durations), "step_ms": timing.scaled(stats, 1e3),
           "steps_per_s": 1.0 / stats["median"] if stats["median"] else None,
           "steps_per_s_mean": 1.0 / stats["mean"] if stats["mean"] else None,
           "busbw_gbps": timing.allreduce_bandwidth(total, stats["median"], ctx.size)[1],
           "correct": correct, "check_error": message}
    rec.update(resources)
    ctx.log("%-18s median step %9.2f ms  %8.1f steps/s  %s"
            % (variant, rec["step_ms"]["median"], rec["steps_per_s"] or 0,
               "ok" if correct else "WRONG: %s" % message))
    return rec


# ---------------------------------------------------------------------------
# Workers


def run_worker(ctx, cfg):
    counts = tensor_counts(cfg)
    inputs = rank_inputs(counts, ctx.rank)
    expected = expected_sums(counts, ctx.size)
    runner = {"hvd": _run_hvd, "mwms": _run_mwms, "mpi4py": _run_mpi4py}[ctx.kind]
    records = []
    for variant in VARIANTS[ctx.kind]:
        ctx.barrier()
        call, fetch = runner(ctx, variant, inputs)
        durations, resources, last = timing.time_calls(call, cfg["steps"], cfg["warmup"])
        correct, message = check_all(fetch(last), expected)
        records.append(_record(ctx, variant, cfg, counts, durations, resources, correct,
                               message))
    return records


def _run_hvd(ctx, variant, inputs):
    tf, hvd = ctx.tf, ctx.hvd
    tensors = [tf.constant(a) for a in inputs]
    if variant == "function_ops":
        @tf.function
        def step(ts):
            return [hvd.allreduce(t, op=hvd.Sum, name="fusion_grad_%d" % i)
                    for i, t in enumerate(ts)]
    elif variant == "function_grouped":
        @tf.function
        def step(ts):
            return hvd.grouped_allreduce(ts, op=hvd.Sum, name="fusion_grouped")
    else:
        def step(ts):
            return hvd.grouped_allreduce(ts, op=hvd.Sum, name="fusion_grouped_eager")
    return (lambda: step(tensors)), (lambda out: [t.numpy() for t in out])


def _run_mwms(ctx, variant, inputs):
    tf, strategy = ctx.tf, ctx.strategy
    tensors = [tf.constant(a) for a in inputs]

    def replica_fn(*ts):
        values = [tf.identity(t) for t in ts]  # placed on the replica's device
        return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM,
                                                              values)

    @tf.function
    def step(ts):
        return strategy.run(replica_fn, args=tuple(ts))

    def fetch(out):
        return [strategy.experimental_local_results(t)[0].numpy() for t in out]
    return (lambda: step(tensors)), fetch


def _run_mpi4py(ctx, variant, inputs):
    from mpi4py import MPI
    comm = ctx.comm
    outputs = [np.empty_like(a) for a in inputs]  # allocated once, reused every step
    if variant == "packed":
        offsets = np.cumsum([0] + [a.size for a in inputs])
        buf = np.empty(int(offsets[-1]), dtype=np.float32)
        pieces = [buf[offsets[i]:offsets[i + 1]] for i in range(len(inputs))]

        def step():
            for piece, a in zip(pieces, inputs):
                piece[...] = a
            comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
            for out, piece in zip(outputs, pieces):
                out[...] = piece
            return outputs
    else:
        def step():
            for a, out in zip(inputs, outputs):
                comm.Allreduce(a, out, op=MPI.SUM)
            return outputs
    return step, (lambda out: out)


# ---------------------------------------------------------------------------
# Report


def best_by_contender(records):
    """{contender: the record of its fastest variant (correct ones first)}"""
    best = {}
    for rec in records:
        cur = best.get(rec["contender"])
        key = (bool(rec["correct"]), rec["steps_per_s"] or 0)
        if cur is None or key > (bool(cur["correct"]), cur["steps_per_s"] or 0):
            best[rec["contender"]] = rec
    return best


def print_tables(records, contenders):
    best = best_by_contender(records)
    rows = []
    for rec in sorted(records, key=lambda r: (launch.ORDER.index(r["contender"]),
                                              -(r["steps_per_s"] or 0))):
        name = rec["contender"]
        st = rec["step_ms"]
        rows.append([contenders[name].label if name in contenders else name, rec["variant"],
                     formats.fmt(st["median"]), formats.fmt(st["min"]), formats.fmt(st["max"]),
                     formats.fmt(rec["steps_per_s"]), formats.fmt(rec["busbw_gbps"]),
                     formats.fmt(rec.get("cpu_ms_per_call")),
                     "yes" if rec["correct"] else "NO", "*" if best[name] is rec else "",
                     rounds.fmt_spread(rec.get("rounds"))])
    if records:
        r0 = records[0]
        title = ("Fusion: one step = %d tensors, %s per step (200 x 16 KiB + 4 x 4 MiB), "
                 "%d ranks; * = the contender's best" % (
                     r0["tensors"], formats.human_bytes(r0["bytes_per_step"]), r0["ranks"]))
    else:
        title = "Fusion: no results"
    tables.print_table(title, ["contender", "variant", "median_ms", "min_ms", "max_ms",
                               "steps/s", "busbw", "cpu_ms/step", "correct", "best",
                               "rounds: steps/s [min-max]"], rows)


def plot_axes(ax, records, contenders):
    rows = sorted(records, key=lambda r: (launch.ORDER.index(r["contender"]),
                                          -(r["steps_per_s"] or 0)))
    labels, values, colors = [], [], []
    for rec in rows:
        name = rec["contender"]
        labels.append("%s\n%s" % (contenders[name].label if name in contenders else name,
                                  rec["variant"]))
        values.append(rec["steps_per_s"] or 0)
        colors.append(tables.style(name)[0])
    bars = ax.barh(range(len(rows)), values, color=colors)
    for bar, value, rec in zip(bars, values, rows):
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2,
                " %s%s" % (formats.fmt(value), "" if rec["correct"] else " WRONG"),
                va="center", fontsize=7)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("steps per second (higher is better)")
    ax.set_title("Fusion: 200 x 16 KiB + 4 x 4 MiB per step")
    ax.grid(True, axis="x", alpha=0.3)
    if values:
        ax.set_xlim(0, max(values) * 1.25)


def plot(records, contenders, header, path):
    plt = tables.pyplot()
    fig, ax = plt.subplots(figsize=(10, 0.45 * max(4, len(records)) + 1.5))
    plot_axes(ax, records, contenders)
    fig.text(0.5, 0.005, tables.caption(header), ha="center", fontsize=7)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(header, contenders, runs, results_dir, tag="fusion", records=None):
    """Prints the tables, writes <tag>.json/.png; records: the part's records
    (default: those in runs; compare.py passes the medians of its rounds)."""
    return report_lib.write_part(
        sys.modules[__name__], header, contenders, runs, results_dir, tag, records,
        extra=lambda recs: {"best": dict((k, v["variant"])
                                         for k, v in best_by_contender(recs).items())})


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    launch.add_common_arguments(parser, CONTENDERS)
    parser.add_argument("--steps", type=int, default=None, help="timed steps per variant")
    args = parser.parse_args(argv)
    cfg = make_config(args.quick)
    if args.steps:
        cfg["steps"] = args.steps
    return report_lib.run_part(sys.modules[__name__], "fusion", args, cfg)


if __name__ == "__main__":
    sys.exit(main())

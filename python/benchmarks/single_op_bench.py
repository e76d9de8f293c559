"""One allreduce per call, as a training step sees it: tf_hvd against TensorFlow's floor and
plain MPI, in interleaved rounds.

    python python/benchmarks/single_op_bench.py [--quick] [--np 2] [--rounds 5]
        [--sizes 4K,16M] [--contenders tf_hvd_gloo,tf_hvd_mpi,mpi4py]

A training step does not run allreduces back to back (allreduce_bench.py's chain mode):
each gradient, or fused group, is one op whose result the step waits for. Here every
tf_hvd process repeats, per float32 size: a barrier (a one-element hvd.allreduce), one
call of a tf.function holding one hvd.allreduce (a fresh output each call, a fixed name as
a training script has), a barrier, and one call of a tf.function computing ``t + 0.0``
(TensorFlow's floor: what producing a fresh tensor of that size costs with no
communication). mpi4py does the same with ``Comm.Allreduce(MPI.IN_PLACE, buf)`` on a
numpy buffer (its barrier: a one-element Allreduce). A call's time is the slowest rank's
(every rank times its own calls; the per-call maximum over the ranks is taken after the
loop); a figure is the median call.

mpi4py also runs the same step with plain MPI in it: a barrier, the floor's tf.function and
then ``Allreduce(MPI.IN_PLACE, ...)`` timed together, a barrier, the floor alone. What MPI
adds to such a step (its time minus that floor) is what the ranks' TensorFlow work around
the collective costs any library: where the ranks outnumber the CPUs (np=3 on two) it is
several times the bare Allreduce; the table shows it beside the goal, which stays the bare
time.

What tf_hvd adds to a step is its time per call minus the floor, both from the same
processes; the goal (lib/targets.py, SINGLE_OP_GOALS): at most plain MPI's in-place time at
every size from 64 KiB, at most 5x it below (where MPI's few microseconds are near the
hardware). The ratio added / mpi4py is taken per round, from that round's runs; the verdict
is lib/rounds.py's (met when every round clears the goal). Writes
<results>/single_op-np<N>.json and .png (--tag changes the prefix).
"""

import argparse
import sys

import numpy as np

import allreduce_bench
from lib import formats, jsonio, launch, paths, rounds, tables, targets

PART = "single_op"
KINDS = ("hvd", "mpi4py")
CONTENDERS = ("tf_hvd_gloo", "tf_hvd_mpi", "mpi4py")
SIZES = allreduce_bench.SIZES
ROUNDS, QUICK_ROUNDS = 5, 3
# Timed calls per size (each one op, a floor call and two barriers); --quick: a quarter,
# at least 5. The warm-up is allreduce_bench's (the same with --quick).
_CALLS = {4 * formats.KiB: 200, 64 * formats.KiB: 200, 256 * formats.KiB: 150,
          formats.MiB: 100, 4 * formats.MiB: 60, 16 * formats.MiB: 40,
          64 * formats.MiB: 15, 256 * formats.MiB: 9}


def plan(nbytes, quick):
    """(warm-up calls, timed calls) at one size.

    >>> plan(16 * 1024 * 1024, quick=False)
    (3, 40)
    >>> plan(16 * 1024 * 1024, quick=True)
    (3, 10)
    """
    warmup = allreduce_bench.iterations(nbytes, quick)[0]
    calls = allreduce_bench._nearest_below(_CALLS, nbytes)
    return warmup, max(5, calls // 4) if quick else calls


def make_config(sizes, quick):
    return {"sizes": list(sizes), "quick": bool(quick),
            "plan": dict((str(s), plan(s, quick)) for s in sizes)}


def slowest_per_call(durations_per_rank):
    """[ranks][calls] -> [calls]: each call's time on the slowest rank.

    >>> slowest_per_call([[1.0, 5.0], [2.0, 3.0]])
    [2.0, 5.0]
    """
    return [max(column) for column in zip(*durations_per_rank)]


# ---------------------------------------------------------------------------
# Workers (run inside the contenders' processes by lib/worker.py)


def run_worker(ctx, cfg):
    runner = _run_hvd if ctx.kind == "hvd" else _run_mpi4py
    records = []
    for nbytes in cfg["sizes"]:
        warmup, calls = cfg["plan"][str(nbytes)]
        records += runner(ctx, nbytes, warmup, calls)
    return records


def _record(ctx, mode, nbytes, slowest, correct, message):
    stats = timing_us(slowest)
    ctx.log("%-8s %8s  median %10.1f us  [%.1f-%.1f]  %s"
            % (mode, formats.human_bytes(nbytes), stats["median"], stats["min"], stats["max"],
               "ok" if correct else "WRONG: %s" % message))
    return {"contender": ctx.contender, "mode": mode, "bytes": nbytes, "dtype": "float32",
            "ranks": ctx.size, "iterations": len(slowest), "latency_us": stats,
            "correct": correct, "check_error": message}


def timing_us(seconds):
    from lib import timing
    return timing.scaled(timing.summarize(seconds), 1e6)


def step_and_floor_times(barrier, step, floor, warmup, calls):
    """Times step() and floor() call by call, each right after barrier(), the first warmup
    calls left out: (step seconds, floor seconds, step()'s last result).

    >>> ticks = []
    >>> steps, floors, last = step_and_floor_times(lambda: ticks.append("|"),
    ...     lambda: ticks.append("s") or len(ticks), lambda: ticks.append("f"), 1, 2)
    >>> "".join(ticks), len(steps), len(floors), last
    ('|s|f|s|f|s|f', 2, 2, 10)
    """
    import time
    step_times, floor_times, last = [], [], None
    for i in range(warmup + calls):
        barrier()
        t0 = time.perf_counter()
        last = step()
        t1 = time.perf_counter()
        barrier()
        t2 = time.perf_counter()
        floor()
        t3 = time.perf_counter()
        if i >= warmup:
            step_times.append(t1 - t0)
            floor_times.append(t3 - t2)
    return step_times, floor_times, last


def _run_hvd(ctx, nbytes, warmup, calls):
    tf, hvd = ctx.tf, ctx.hvd
    count = nbytes // 4
    x = tf.constant(allreduce_bench.rank_input(count, ctx.rank))
    one = tf.zeros([1])
    name = "single_op_%d" % nbytes
    op = tf.function(lambda t: hvd.allreduce(t, op=hvd.Sum, name=name))
    floor = tf.function(lambda t: t + 0.0)
    barrier = tf.function(lambda t: hvd.allreduce(t, op=hvd.Sum, name="single_op_barrier"))
    op_times, floor_times, last = step_and_floor_times(
        lambda: barrier(one), lambda: op(x), lambda: floor(x), warmup, calls)
    correct, message = allreduce_bench.check(last.numpy(), allreduce_bench.expected_sum(
        count, ctx.size))
    del last
    both = hvd.allgather(tf.constant([[op_times, floor_times]], tf.float64)).numpy()
    return [_record(ctx, "single", nbytes, slowest_per_call(both[:, 0, :].tolist()),
                    correct, message),
            _record(ctx, "tf_floor", nbytes, slowest_per_call(both[:, 1, :].tolist()),
                    True, None)]


def _run_mpi4py(ctx, nbytes, warmup, calls):
    import time
    from mpi4py import MPI
    comm = ctx.comm
    count = nbytes // 4
    send = allreduce_bench.rank_input(count, ctx.rank)
    buf = send.copy()
    one = np.zeros(1, np.float32)

    def barrier():
        comm.Allreduce(MPI.IN_PLACE, one, op=MPI.SUM)

    def check():
        # In place, the sums grow from call to call: the check runs on fresh input.
        np.copyto(buf, send)
        comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
        return allreduce_bench.check(buf, allreduce_bench.expected_sum(count, ctx.size))

    times = []
    for i in range(warmup + calls):
        barrier()
        t0 = time.perf_counter()
        comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    correct, message = check()
    records = [_record(ctx, "inplace_single", nbytes, slowest_per_call(comm.allgather(times)),
                       correct, message)]
    # The same Allreduce inside a TensorFlow step (after the floor's tf.function), and the
    # floor alone; imported here so that the bare loop above runs before any TF thread.
    import tensorflow as tf
    x = tf.constant(send)
    floor = tf.function(lambda t: t + 0.0)
    step_times, floor_times, _ = step_and_floor_times(
        barrier, lambda: (floor(x), comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)),
        lambda: floor(x), warmup, calls)
    correct, message = check()
    return records + [
        _record(ctx, "in_tf_step", nbytes, slowest_per_call(comm.allgather(step_times)),
                correct, message),
        _record(ctx, "in_tf_step_floor", nbytes,
                slowest_per_call(comm.allgather(floor_times)), True, None)]


# ---------------------------------------------------------------------------
# The rounds' figures and the verdicts


def _median(records, contender, mode, nbytes):
    for rec in records:
        if (rec["contender"], rec["mode"], rec["bytes"]) == (contender, mode, nbytes):
            return rec["latency_us"]["median"] if rec["correct"] else None
    return None


def round_figures(records, transport_contender, nbytes):
    """One round's figures at one size for one tf_hvd contender: per call, floor, added,
    mpi4py, added / mpi4py, what mpi4py's Allreduce adds to a TensorFlow step and added /
    that (None where a run is missing).

    >>> recs = [{"contender": "tf_hvd_mpi", "mode": "single", "bytes": 4, "correct": True,
    ...          "latency_us": {"median": 500.0}},
    ...         {"contender": "tf_hvd_mpi", "mode": "tf_floor", "bytes": 4, "correct": True,
    ...          "latency_us": {"median": 450.0}},
    ...         {"contender": "mpi4py", "mode": "inplace_single", "bytes": 4,
    ...          "correct": True, "latency_us": {"median": 25.0}}]
    >>> round_figures(recs, "tf_hvd_mpi", 4)["added_over_mpi4py"]
    2.0
    >>> recs += [{"contender": "mpi4py", "mode": "in_tf_step", "bytes": 4, "correct": True,
    ...           "latency_us": {"median": 480.0}},
    ...          {"contender": "mpi4py", "mode": "in_tf_step_floor", "bytes": 4,
    ...           "correct": True, "latency_us": {"median": 440.0}}]
    >>> f = round_figures(recs, "tf_hvd_mpi", 4)
    >>> f["mpi_in_step_us"], f["added_over_mpi_in_step"]
    (40.0, 1.25)
    """
    def difference(a, b):
        return a - b if a is not None and b is not None else None

    def ratio(a, b):
        return a / b if a is not None and b else None

    per_call = _median(records, transport_contender, "single", nbytes)
    floor = _median(records, transport_contender, "tf_floor", nbytes)
    mpi = _median(records, "mpi4py", "inplace_single", nbytes)
    added = difference(per_call, floor)
    in_step = difference(_median(records, "mpi4py", "in_tf_step", nbytes),
                         _median(records, "mpi4py", "in_tf_step_floor", nbytes))
    return {"per_call_us": per_call, "tf_floor_us": floor, "added_us": added,
            "mpi4py_us": mpi, "added_over_mpi4py": ratio(added, mpi),
            "mpi_in_step_us": in_step, "added_over_mpi_in_step": ratio(added, in_step)}


def summary(records_per_round, sizes, hvd_contenders):
    """Per tf_hvd contender and size: every figure's spread over the rounds, and the
    verdict of added / mpi4py against its goal."""
    rows = []
    for name in hvd_contenders:
        for nbytes in sizes:
            per_round = [round_figures(recs, name, nbytes) for recs in records_per_round]
            goal = targets.single_op_goal(nbytes)
            row = {"contender": name, "bytes": nbytes, "goal": goal}
            for key in ("per_call_us", "tf_floor_us", "added_us", "mpi4py_us",
                        "added_over_mpi4py", "mpi_in_step_us", "added_over_mpi_in_step"):
                row[key] = rounds.spread([f[key] for f in per_round])
            row["verdict"] = rounds.verdict(row["added_over_mpi4py"]["values"], "<=", goal)
            rows.append(row)
    return rows


# ---------------------------------------------------------------------------
# Report


def print_tables(rows, contenders):
    table = []
    for row in rows:
        label = contenders[row["contender"]].label if row["contender"] in contenders else \
            row["contender"]
        table.append([label, formats.human_bytes(row["bytes"]),
                      rounds.fmt_spread(row["per_call_us"]),
                      rounds.fmt_spread(row["tf_floor_us"]),
                      rounds.fmt_spread(row["added_us"]), rounds.fmt_spread(row["mpi4py_us"]),
                      rounds.fmt_spread(row["added_over_mpi4py"]),
                      "<= %g" % row["goal"], row["verdict"] or "-",
                      rounds.fmt_spread(row["mpi_in_step_us"]),
                      rounds.fmt_spread(row["added_over_mpi_in_step"])])
    tables.print_table(
        "One allreduce per tf.function call (float32 sum), the slowest rank's time per call "
        "in us, median [min-max] over the rounds; last two columns: what mpi4py's Allreduce "
        "adds to the same TensorFlow step, and tf_hvd's added time over it",
        ["contender", "size", "tf_hvd per call", "TF floor", "added by tf_hvd",
         "mpi4py in place", "added / mpi4py", "goal", "verdict", "MPI added in a TF step",
         "added / that"], table)


def plot(rows, contenders, header, path):
    plt = tables.pyplot()
    fig, ax = plt.subplots(figsize=(9, 6))
    names = sorted(set(r["contender"] for r in rows), key=launch.ORDER.index)
    for name in names:
        mine = [r for r in rows if r["contender"] == name and r["added_us"]["median"]]
        color, marker = tables.style(name)
        ax.plot([r["bytes"] for r in mine], [r["added_us"]["median"] for r in mine], "-",
                color=color, marker=marker, label="added by %s" % contenders[name].label)
    mpi = [r for r in rows if r["contender"] == names[0] and r["mpi4py_us"]["median"]]
    color, marker = tables.style("mpi4py")
    ax.plot([r["bytes"] for r in mpi], [r["mpi4py_us"]["median"] for r in mpi], "--",
            color=color, marker=marker, label="mpi4py in place")
    in_step = [r for r in mpi if (r["mpi_in_step_us"]["median"] or 0) > 0]
    ax.plot([r["bytes"] for r in in_step], [r["mpi_in_step_us"]["median"] for r in in_step],
            ":", color=color, marker=marker, label="added by mpi4py in a TF step")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.grid(True, which="major", alpha=0.3)
    ax.set_xlabel("message size (bytes, float32)")
    ax.set_ylabel("us per call, slowest rank, median round (lower is better)")
    ax.set_title("One allreduce per call, np=%s: what tf_hvd adds over TensorFlow's floor"
                 % header.get("np"))
    ax.legend(fontsize=8)
    fig.text(0.5, 0.005, tables.caption(header), ha="center", fontsize=7)
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args(argv=None):
    """(args, sizes, rounds, tag) from the command line.

    >>> args, sizes, n, tag = parse_args(["--np", "3", "--sizes", "4K,16M"])
    >>> sizes, n, tag
    ([4096, 16777216], 5, 'single_op-np3')
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    launch.add_common_arguments(parser, CONTENDERS)
    parser.add_argument("--sizes", default=None,
                        help="comma-separated message sizes (default 4K..256M as "
                             "allreduce_bench.py)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="interleaved rounds (default %d, %d with --quick)"
                        % (ROUNDS, QUICK_ROUNDS))
    args = parser.parse_args(argv)
    sizes = formats.parse_list(args.sizes, formats.parse_size) if args.sizes else SIZES
    if any(s % 4 or s <= 0 for s in sizes):
        parser.error("--sizes: every size must be a positive multiple of 4 bytes (float32)")
    n_rounds = args.rounds or (QUICK_ROUNDS if args.quick else ROUNDS)
    if n_rounds < 1:
        parser.error("--rounds: at least 1")
    return args, sizes, n_rounds, args.tag or "single_op-np%d" % args.np


def main(argv=None):
    args, sizes, n_rounds, tag = parse_args(argv)
    cfg = make_config(sizes, args.quick)
    header = jsonio.run_header("single_op", args)
    header["config"] = dict(cfg, rounds=n_rounds)
    contenders, per_round = rounds.run_rounds(tag, {PART: sys.modules[__name__]}, args,
                                              {PART: cfg}, CONTENDERS, n_rounds)
    jsonio.finish_header(header)
    records_per_round = [launch.part_records(runs, PART) for runs in per_round]
    hvd_names = [n for n in launch.TF_HVD if n in contenders]
    rows = summary(records_per_round, sizes, hvd_names)
    print_tables(rows, contenders)
    results_dir = paths.ensure_dir(args.results_dir)
    data = dict(header)
    data["contenders"] = launch.contenders_section(contenders, per_round[-1])
    data["summary"] = rows
    data["rounds"] = [{"runs": dict((n, {"status": r["status"], "seconds": r["seconds"],
                                          "loadavg_1min": r["loadavg_1min"],
                                          "placement": r.get("placement")})
                                     for n, r in runs.items()), "records": recs}
                      for runs, recs in zip(per_round, records_per_round)]
    jsonio.write_json("%s/%s.json" % (results_dir, tag), data)
    if rows:
        plot(rows, contenders, header, "%s/%s.png" % (results_dir, tag))
    tables.log("wrote %s/%s.json and .png" % (results_dir, tag))
    ok = all(r["status"] == "ok" for runs in per_round for r in runs.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

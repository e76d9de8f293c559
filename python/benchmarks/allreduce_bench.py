"""Allreduce latency and bandwidth, side by side.

    python python/benchmarks/allreduce_bench.py [--quick] [--np 2] [--sizes 4K,1M]

float32 messages of 4 KiB .. 256 MiB, summed over N processes by each contender:
tf_hvd over Gloo and over MPI (eager and in a tf.function), MultiWorkerMirroredStrategy
with the RING implementation (eager and tf.function), raw mpi4py Comm.Allreduce on
preallocated numpy buffers (send/receive buffers, and in place with MPI.IN_PLACE; default
malloc, and with glibc's thresholds raised so that MPICH's temporary buffers are reused),
and a local numpy copy (numpy.copyto into a kept buffer) as the physical limit.
Every call is timed on its own: median, min and max latency; algorithm bandwidth
(bytes / median time) and bus bandwidth (x 2(n-1)/n). Every contender's result is
compared with the expected sum. Writes <results>/allreduce.json and allreduce.png.

Modes: eager (one op per Python call, a fixed name), eager_unnamed (the same without
name=, tf_hvd only, messages up to 64 KiB: every call is "allreduce.noname"), function
(one tf.function call per allreduce: includes TensorFlow's own function-call overhead,
~0.1-0.2 ms per call of a tf.function on this 2-core machine), and chain: one tf.function
runs chain_plan(size)'s number of dependent allreduces (Sum, then Average of the result, so the
values stay exact for a power-of-two process count and are checked) and the time per
allreduce is call time / chain length -- the collective's cost inside a graph, without
TensorFlow's per-call dispatch. tf_hvd runs the chain at every size (200 ops up to 64 KiB,
fewer for larger messages: see CHAIN_LENGTHS); MultiWorkerMirroredStrategy runs it up
to 64 KiB, 50 ops (unrolled: MWMS does not allow collectives inside tf.while_loop).
"""

import argparse
import sys

import numpy as np

from lib import formats, knobs, launch, rounds, tables, timing
from lib import report as report_lib

PART = "allreduce"
KINDS = ("hvd", "mwms", "mpi4py", "local")
CONTENDERS = ("tf_hvd_gloo", "tf_hvd_mpi", "mwms_ring", "mpi4py", "mpi4py_malloc",
              "numpy_local")
SIZES = [4 * formats.KiB, 64 * formats.KiB, 256 * formats.KiB, formats.MiB, 4 * formats.MiB,
         16 * formats.MiB, 64 * formats.MiB, 256 * formats.MiB]
TF_MODES = ("eager", "function", "chain", "eager_unnamed")
# Modes only tf_hvd has: eager calls without name= (named after their kind).
HVD_ONLY_MODES = ("eager_unnamed",)
SMALL_MAX_BYTES = 64 * 1024     # eager_unnamed, and MWMS's chain, only up to this size

# (warmup, timed calls) per message size. The warm-up is the same with --quick
# (fewer timed calls only), so the quick medians are not biased by calls that
# still trace, grow TensorFlow's caching allocator or touch new memory (slowly,
# on a VM): the largest sizes warm up three times for that reason.
_WARMUP = {4 * formats.KiB: 20, 64 * formats.KiB: 20, 256 * formats.KiB: 15, formats.MiB: 10,
           4 * formats.MiB: 5, 16 * formats.MiB: 3, 64 * formats.MiB: 3, 256 * formats.MiB: 3}
_TIMED = {
    False: {4 * formats.KiB: 1000, 64 * formats.KiB: 500, 256 * formats.KiB: 300,
            formats.MiB: 200, 4 * formats.MiB: 80, 16 * formats.MiB: 40, 64 * formats.MiB: 12,
            256 * formats.MiB: 7},
    # quick: at least five timed calls, so a median is not one call's luck
    True: {4 * formats.KiB: 100, 64 * formats.KiB: 50, 256 * formats.KiB: 40, formats.MiB: 30,
           4 * formats.MiB: 15, 16 * formats.MiB: 9, 64 * formats.MiB: 5, 256 * formats.MiB: 5},
}
# Chain mode: allreduces per tf.function call, per message size, long enough that
# TensorFlow's ~0.1 ms per call adds at most ~4% to one allreduce as fast as
# mpi4py's (0.5 us of a ~14 us op at 64 KiB, 33 us of a ~7 ms op at 64 MiB; the
# names stay well within the response cache's 1024), and timed chain calls
# (full, quick). The warm-up is the size's (_WARMUP), in calls of the chain.
# MWMS unrolls at most MWMS_CHAIN_MAX (its ops take ~1 ms each; longer graphs
# only cost tracing time).
CHAIN_LENGTHS = {4 * formats.KiB: 200, 64 * formats.KiB: 200, 256 * formats.KiB: 100,
                 formats.MiB: 40, 4 * formats.MiB: 16, 16 * formats.MiB: 8, 64 * formats.MiB: 3,
                 256 * formats.MiB: 3}
MWMS_CHAIN_MAX = 50
CHAIN_CALLS = {False: 20, True: 10}


def _nearest_below(table, nbytes):
    """The entry of the largest size in table not above nbytes (else the smallest)."""
    below = [s for s in table if s <= nbytes]
    return table[max(below) if below else min(table)]


def iterations(nbytes, quick):
    """(warmup, timed calls) of the modes that time one allreduce per call."""
    if nbytes in _TIMED[bool(quick)]:
        return _WARMUP[nbytes], _TIMED[bool(quick)][nbytes]
    budget = (64 if quick else 1024) * formats.MiB  # bytes moved per size, roughly
    timed = int(min(1000 if not quick else 100, max(5, budget // max(nbytes, 1))))
    return _nearest_below(_WARMUP, nbytes), timed


def chain_plan(nbytes, quick):
    """(warmup calls, allreduces per call, timed calls) of chain mode at one size.

    >>> chain_plan(256 * 1024 * 1024, quick=True)
    (3, 3, 10)
    """
    return (_nearest_below(_WARMUP, nbytes), _nearest_below(CHAIN_LENGTHS, nbytes),
            CHAIN_CALLS[bool(quick)])


def make_config(sizes, modes, quick):
    return {"sizes": list(sizes), "modes": list(modes), "quick": bool(quick),
            "iterations": dict((str(s), iterations(s, quick)) for s in sizes),
            "chain": dict((str(s), chain_plan(s, quick)) for s in sizes)}


# ---------------------------------------------------------------------------
# Data: every rank contributes a different, exactly representable pattern


def rank_input(count, rank):
    return np.resize(np.arange(251, dtype=np.float32), count) + np.float32(rank + 1)


def expected_sum(count, size):
    return (np.resize(np.arange(251, dtype=np.float32), count) * np.float32(size)
            + np.float32(size * (size + 1) // 2))


def check(result, expected, exact=True):
    """(correct, message) comparing an allreduce result with the expected sum."""
    result = np.asarray(result).reshape(-1)
    if result.shape != expected.shape:
        return False, "shape %s, expected %s" % (result.shape, expected.shape)
    if np.array_equal(result, expected) or (
            not exact and np.allclose(result, expected, rtol=1e-5, atol=0)):
        return True, None
    bad = np.flatnonzero(result != expected)
    i = int(bad[0])
    return False, "%d of %d values wrong, first at %d: %r, expected %r" % (
        bad.size, expected.size, i, float(result[i]), float(expected[i]))


def _modes(cfg, nbytes, hvd=True):
    """The modes run for one size: eager_unnamed only for latency-bound sizes, and
    chain for every size on tf_hvd but only latency-bound ones on MWMS."""
    small = nbytes <= SMALL_MAX_BYTES
    return [m for m in cfg["modes"]
            if (m != "eager_unnamed" or small) and (hvd or m not in HVD_ONLY_MODES) and
            (hvd or m != "chain" or small)]


def _chain(cfg, nbytes):
    """(warmup calls, allreduces per call, timed calls) from the config (older
    configs without "chain": the plan for the size)."""
    plan = cfg.get("chain", {}).get(str(nbytes))
    return tuple(plan) if plan else chain_plan(nbytes, cfg.get("quick"))


def _chain_exact(size):
    # Averaging identical values is exact when the division is by a power of two.
    return size & (size - 1) == 0


def _record(ctx, mode, nbytes, warmup, durations, resources, correct, message, ranks,
            chain_length=None):
    if mode == "chain":
        durations = [d / chain_length for d in durations]
    stats = timing.summarize(durations)
    alg, bus = timing.allreduce_bandwidth(nbytes, stats["median"], ranks)
    _, bus_best = timing.allreduce_bandwidth(nbytes, stats["min"], ranks)
    rec = {"contender": ctx.contender, "mode": mode, "bytes": nbytes, "dtype": "float32",
           "ranks": ranks, "warmup": warmup, "iterations": len(durations),
           "latency_us": timing.scaled(stats, 1e6), "algbw_gbps": alg, "busbw_gbps": bus,
           "busbw_best_gbps": bus_best, "correct": correct, "check_error": message}
    if mode == "chain":
        rec["chain_length"] = chain_length  # allreduces per timed call (iterations: calls)
        # per allreduce, as the latency is (cpu_per_wall is a rate: unchanged)
        resources = dict(resources, minflt_per_call=resources["minflt_per_call"] / chain_length,
                         cpu_ms_per_call=resources["cpu_ms_per_call"] / chain_length)
    rec.update(resources)
    ctx.log("%-8s %8s  median %10.1f us  busbw %7.3f GB/s  %s"
            % (mode, formats.human_bytes(nbytes), rec["latency_us"]["median"], bus or 0,
               "ok" if correct else "WRONG: %s" % message))
    return rec


# ---------------------------------------------------------------------------
# Workers (run inside the contender's processes by lib/worker.py)


def run_worker(ctx, cfg):
    runner = {"hvd": _run_hvd, "mwms": _run_mwms, "mpi4py": _run_mpi4py,
              "local": _run_local}[ctx.kind]
    records = []
    for nbytes in cfg["sizes"]:
        warmup, timed = cfg["iterations"][str(nbytes)]
        records += runner(ctx, cfg, nbytes, warmup, timed)
    return records


def _run_hvd(ctx, cfg, nbytes, warmup, timed):
    tf, hvd = ctx.tf, ctx.hvd
    count = nbytes // 4
    x = tf.constant(rank_input(count, ctx.rank))
    expected = expected_sum(count, ctx.size)
    records = []
    for mode in _modes(cfg, nbytes):
        # A fixed name per call site, as a training script has: the response cache
        # recognises the tensor from the second call on.
        name = "bench_allreduce_%s_%d" % (mode, nbytes)
        calls, length, warm = timed, None, warmup
        if mode == "eager":
            def call():
                return hvd.allreduce(x, op=hvd.Sum, name=name)
        elif mode == "eager_unnamed":
            def call():  # "allreduce.noname" on every call: the cache still hits
                return hvd.allreduce(x, op=hvd.Sum)
        elif mode == "function":
            fn = tf.function(lambda t: hvd.allreduce(t, op=hvd.Sum, name=name))

            def call():
                return fn(x)
        else:
            warm, length, calls = _chain(cfg, nbytes)

            @tf.function
            def chain(t):
                t = hvd.allreduce(t, op=hvd.Sum, name=name)
                for i in range(1, length):
                    t = hvd.allreduce(t, op=hvd.Average, name="%s_%d" % (name, i))
                return t

            def call():
                return chain(x)
        ctx.barrier()
        durations, resources, last = timing.time_calls(call, calls, warm)
        correct, message = check(last.numpy(), expected,
                                 mode != "chain" or _chain_exact(ctx.size))
        records.append(_record(ctx, mode, nbytes, warm, durations, resources, correct,
                               message, ctx.size, length))
        del last
    return records


def _run_mwms(ctx, cfg, nbytes, warmup, timed):
    tf, strategy = ctx.tf, ctx.strategy
    count = nbytes // 4
    x = tf.constant(rank_input(count, ctx.rank))
    expected = expected_sum(count, ctx.size)

    def replica_fn(t):
        # tf.identity places the value on the replica's device, as a gradient
        # computed in the replica function is (a tf.function argument has no device,
        # and MWMS's all_reduce then fails with "destinations can not be empty").
        return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM,
                                                              tf.identity(t))

    warm_chain, length, chain_calls = _chain(cfg, nbytes)
    length = min(length, MWMS_CHAIN_MAX)

    def chain_fn(t):
        replica = tf.distribute.get_replica_context()
        t = replica.all_reduce(tf.distribute.ReduceOp.SUM, tf.identity(t))
        for _ in range(1, length):
            t = replica.all_reduce(tf.distribute.ReduceOp.MEAN, t)
        return t

    records = []
    for mode in _modes(cfg, nbytes, hvd=False):
        calls, warm = timed, warmup
        if mode == "eager":
            def call():
                return strategy.run(replica_fn, args=(x,))
        elif mode == "function":
            fn = tf.function(lambda t: strategy.run(replica_fn, args=(t,)))

            def call():
                return fn(x)
        else:
            chain = tf.function(lambda t: strategy.run(chain_fn, args=(t,)))

            def call():
                return chain(x)
            calls, warm = chain_calls, warm_chain
        ctx.barrier()
        durations, resources, last = timing.time_calls(call, calls, warm)
        value = strategy.experimental_local_results(last)[0]
        correct, message = check(value.numpy(), expected,
                                 mode != "chain" or _chain_exact(ctx.size))
        records.append(_record(ctx, mode, nbytes, warm, durations, resources, correct,
                               message, ctx.size, length))
    return records


def _run_mpi4py(ctx, cfg, nbytes, warmup, timed):
    """Two ways, both on numpy buffers allocated once: "numpy" (send and receive
    buffers) and "numpy_inplace" (MPI.IN_PLACE on one buffer, MPI's fastest way)."""
    from mpi4py import MPI
    comm = ctx.comm
    count = nbytes // 4
    send = rank_input(count, ctx.rank)
    recv = np.empty_like(send)   # both buffers allocated once, reused by every call
    expected = expected_sum(count, ctx.size)

    def call():
        comm.Allreduce(send, recv, op=MPI.SUM)
    comm.Barrier()
    durations, resources, _ = timing.time_calls(call, timed, warmup)
    correct, message = check(recv, expected)
    records = [_record(ctx, "numpy", nbytes, warmup, durations, resources, correct, message,
                       ctx.size)]

    # In place: the sums grow from call to call (to inf in the end, which costs
    # no more to add); the check runs once more on fresh input.
    buf = send.copy()

    def call_inplace():
        comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
    comm.Barrier()
    durations, resources, _ = timing.time_calls(call_inplace, timed, warmup)
    np.copyto(buf, send)
    comm.Barrier()
    call_inplace()
    correct, message = check(buf, expected)
    records.append(_record(ctx, "numpy_inplace", nbytes, warmup, durations, resources,
                           correct, message, ctx.size))
    return records


def _run_local(ctx, cfg, nbytes, warmup, timed):
    count = nbytes // 4
    a = rank_input(count, 0)
    b = rank_input(count, 1)
    out = np.empty_like(a)
    records = []
    # copy: the memory bandwidth one process gets (read + write of nbytes)
    durations, resources, _ = timing.time_calls(lambda: np.copyto(out, a), timed, warmup)
    correct, message = check(out, a)
    records.append(_record(ctx, "copy", nbytes, warmup, durations, resources, correct,
                           message, 1))
    # add: the speed of the reduction itself (two reads + one write of nbytes)
    durations, resources, _ = timing.time_calls(lambda: np.add(a, b, out=out), timed, warmup)
    correct, message = check(out, expected_sum(count, 2))
    records.append(_record(ctx, "add", nbytes, warmup, durations, resources, correct,
                           message, 1))
    return records


# ---------------------------------------------------------------------------
# Report


def series(records):
    """{(contender, mode): [records sorted by size]}"""
    found = {}
    for rec in records:
        found.setdefault((rec["contender"], rec["mode"]), []).append(rec)
    for recs in found.values():
        recs.sort(key=lambda r: r["bytes"])
    return found


def print_tables(records, contenders):
    rows = []
    for (name, mode), recs in sorted(series(records).items(),
                                     key=lambda kv: (launch.ORDER.index(kv[0][0]), kv[0][1])):
        label = contenders[name].label if name in contenders else name
        for r in recs:
            lat = r["latency_us"]
            rows.append([label, mode, formats.human_bytes(r["bytes"]), r["iterations"],
                         formats.fmt(lat["median"]), formats.fmt(lat["min"]),
                         formats.fmt(lat["max"]), formats.fmt(r["algbw_gbps"]),
                         formats.fmt(r["busbw_gbps"]), formats.fmt(r.get("minflt_per_call")),
                         formats.fmt(r.get("cpu_ms_per_call")),
                         "yes" if r["correct"] else "NO", rounds.fmt_spread(r.get("rounds"))])
    tables.print_table(
        "Allreduce (float32, sum): latency in microseconds, bandwidth in GB/s "
        "(numpy copy/add: one process, bytes / time)",
        ["contender", "mode", "size", "calls", "median_us", "min_us", "max_us", "algbw",
         "busbw", "minflt/call", "cpu_ms/call", "correct", "rounds: median_us [min-max]"],
        rows)
    tables.log("minflt/call: minor page faults per call in rank 0 (memory mapped afresh on "
               "every call; 256 MiB = 65536 pages). mpi4py (malloc reuse) runs with %s, so "
               "MPICH's temporary buffers stay in the heap between calls. cpu_ms/call: CPU "
               "time of rank 0 per call (above the latency = several busy threads); chain "
               "mode: both per allreduce, as its latency."
               % " ".join("%s=%s" % kv for kv in sorted(knobs.MALLOC_REUSE_ENV.items())))


def plot_axes(ax_lat, ax_bw, records, contenders,
              modes=("function", "numpy", "numpy_inplace", "copy")):
    """Latency and bus bandwidth against size on two axes (log-log)."""
    for (name, mode), recs in sorted(series(records).items(),
                                     key=lambda kv: (launch.ORDER.index(kv[0][0]), kv[0][1])):
        if mode not in modes and not (mode == "eager" and "eager" in modes):
            continue
        color, marker = tables.style(name)
        label = "%s%s" % (contenders[name].label if name in contenders else name,
                          "" if mode in ("numpy",) else
                          " [in place]" if mode == "numpy_inplace" else " [%s]" % mode)
        line = "--" if mode in ("eager", "copy") else "-"
        xs = [r["bytes"] for r in recs]
        if name != "numpy_local":
            ax_lat.plot(xs, [r["latency_us"]["median"] for r in recs], line, color=color,
                        marker=marker, label=label)
        ax_bw.plot(xs, [r["busbw_gbps"] for r in recs], line, color=color, marker=marker,
                   label=label)
    for ax in (ax_lat, ax_bw):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.grid(True, which="major", alpha=0.3)
        ax.set_xlabel("message size (bytes, float32)")
        sizes = sorted(set(r["bytes"] for r in records))
        ax.set_xticks(sizes)
        ax.set_xticklabels([formats.human_bytes(s).replace(" ", "") for s in sizes],
                           fontsize=8)
    ax_lat.set_ylabel("latency, median (µs)")
    ax_lat.set_title("Allreduce latency (lower is better)")
    ax_bw.set_ylabel("bus bandwidth (GB/s)")
    ax_bw.set_title("Allreduce bus bandwidth (higher is better)")
    ax_lat.legend(fontsize=7)
    ax_bw.legend(fontsize=7)


def plot(records, contenders, header, path):
    plt = tables.pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(14, 10))
    plot_axes(axes[0][0], axes[0][1], records, contenders,
              modes=("function", "numpy", "numpy_inplace", "copy"))
    plot_axes(axes[1][0], axes[1][1], records, contenders,
              modes=("eager", "numpy", "numpy_inplace", "copy"))
    axes[0][0].set_title("Allreduce latency, tf.function (lower is better)")
    axes[0][1].set_title("Allreduce bus bandwidth, tf.function (higher is better)")
    axes[1][0].set_title("Allreduce latency, eager (lower is better)")
    axes[1][1].set_title("Allreduce bus bandwidth, eager (higher is better)")
    fig.suptitle("Allreduce, np=%s: tf_hvd and the alternatives" % header.get("np"))
    fig.text(0.5, 0.005, tables.caption(header), ha="center", fontsize=7)
    fig.tight_layout(rect=(0, 0.02, 1, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(header, contenders, runs, results_dir, tag="allreduce", records=None):
    """Prints the tables, writes <tag>.json/.png; records: the part's records
    (default: those in runs; compare.py passes the medians of its rounds)."""
    return report_lib.write_part(sys.modules[__name__], header, contenders, runs, results_dir,
                                 tag, records)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    launch.add_common_arguments(parser, CONTENDERS)
    parser.add_argument("--sizes", default=None,
                        help="comma-separated message sizes (default %s)"
                        % ",".join(formats.human_bytes(s).replace(" ", "")[:-2] for s in SIZES))
    parser.add_argument("--modes", default=",".join(TF_MODES),
                        help="TensorFlow modes: eager, function, chain, eager_unnamed "
                             "(default all)")
    args = parser.parse_args(argv)
    sizes = formats.parse_list(args.sizes, formats.parse_size) if args.sizes else SIZES
    cfg = make_config(sizes, formats.parse_list(args.modes), args.quick)
    return report_lib.run_part(sys.modules[__name__], "allreduce", args, cfg)


if __name__ == "__main__":
    sys.exit(main())

"""Allgather latency and bandwidth of tf_hvd: a benchmark part (lib/worker.py runs it).

    configs["allgather"] = allgather_bench.make_config([4 * KiB, MiB], quick=True)
    # then launch.run_contender(contender, ["allgather"], configs, ...), as
    # multihost_bench.py does for flat and hierarchical contenders side by side

A size is the gathered (output) bytes: every rank contributes size / ranks bytes of
float32 (its share of one arange, so the result is checked exactly: it must be the
arange itself). One tf.function call per allgather, each call timed on its own:
median/min/max latency, algorithm bandwidth (output bytes / median time) and bus
bandwidth (x (n-1)/n: the share of the output every rank must receive).
"""

import numpy as np

from lib import formats, timing

PART = "allgather"
KINDS = ("hvd",)
SIZES = [4 * formats.KiB, formats.MiB, 64 * formats.MiB]
# (warmup, timed calls) per size.
_ITERATIONS = {
    False: {4 * formats.KiB: (20, 500), formats.MiB: (5, 60), 64 * formats.MiB: (2, 8)},
    True: {4 * formats.KiB: (5, 50), formats.MiB: (2, 10), 64 * formats.MiB: (1, 3)},
}


def iterations(nbytes, quick):
    table = _ITERATIONS[bool(quick)]
    if nbytes in table:
        return table[nbytes]
    budget = (64 if quick else 512) * formats.MiB
    timed = int(min(100 if quick else 500, max(3, budget // max(nbytes, 1))))
    return (max(1, min(10, timed // 10)), timed)


def make_config(sizes, quick):
    return {"sizes": list(sizes), "quick": bool(quick),
            "iterations": dict((str(s), iterations(s, quick)) for s in sizes)}


def bandwidth(nbytes, seconds, nranks):
    """(algorithm bandwidth, bus bandwidth) in GB/s for an allgather of nbytes output."""
    if not seconds:
        return None, None
    alg = nbytes / seconds / formats.GB
    return alg, alg * (nranks - 1) / nranks


def run_worker(ctx, cfg):
    tf, hvd = ctx.tf, ctx.hvd
    records = []
    for nbytes in cfg["sizes"]:
        warmup, timed = cfg["iterations"][str(nbytes)]
        share = nbytes // 4 // ctx.size
        expected = np.arange(share * ctx.size, dtype=np.float32)
        x = tf.constant(expected[ctx.rank * share:(ctx.rank + 1) * share])
        name = "bench_allgather_%d" % nbytes
        fn = tf.function(lambda t: hvd.allgather(t, name=name))
        ctx.barrier()
        durations, resources, last = timing.time_calls(lambda: fn(x), timed, warmup)
        got = last.numpy()
        correct = got.shape == expected.shape and got.tobytes() == expected.tobytes()
        stats = timing.summarize(durations)
        alg, bus = bandwidth(expected.nbytes, stats["median"], ctx.size)
        rec = {"contender": ctx.contender, "mode": "function", "bytes": int(expected.nbytes),
               "dtype": "float32", "ranks": ctx.size, "warmup": warmup,
               "iterations": len(durations), "latency_us": timing.scaled(stats, 1e6),
               "algbw_gbps": alg, "busbw_gbps": bus, "correct": correct,
               "check_error": None if correct else "differs from the blocks in rank order"}
        rec.update(resources)
        ctx.log("allgather %8s  median %10.1f us  busbw %7.3f GB/s  %s"
                % (formats.human_bytes(nbytes), rec["latency_us"]["median"], bus or 0,
                   "ok" if correct else "WRONG"))
        records.append(rec)
        del last
    return records

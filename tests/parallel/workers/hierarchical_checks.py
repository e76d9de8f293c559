"""Checks that the hierarchical allreduce/allgather ran and gave the flat algorithms' results.

Used by multihost_checks.py (``--algorithms hierarchical`` on hosts with the same number of
ranks each and HOROVOD_HIERARCHICAL_ALLREDUCE/ALLGATHER=1; ``--algorithms flat`` where the
knobs are on but the hosts are uneven, so the flat algorithms must run)::

    ck.section("hierarchical", check_algorithms, ck, "hierarchical")

Every value is known on every rank (each rank's input is a function of its rank), so
results are compared exactly with what any correct algorithm gives: integer-valued float
sums (exact in any order), integer sums, and allgathers byte for byte in rank order with
ragged first dimensions. Floats whose sums round must have the same bits on every rank.
The path taken is read from the core's per-algorithm counters (tf_hvd._hvd.algorithm_counts),
never from timings. With HOROVOD_DYNAMIC_PROCESS_SETS=1 on 2 hosts x 2 ranks, process sets
take their own path: {0, 2} (one rank per host) the hierarchical one, {0, 1, 3} (uneven)
the flat one.
"""

import os

import numpy as np
import tensorflow as tf

import tf_hvd as hvd
from tf_hvd.basics import _lib


def _rank_input(q, count, dtype):
    """Rank q's allreduce input: integers (exact sums in any order and grouping)."""
    i = np.arange(count, dtype=np.int64)
    return ((i % 13) * (q + 1) - 6 * q).astype(dtype)


def _gather_block(q, rows, trailing, dtype):
    """Rank q's allgather block: values that say whose they are, non-integers included."""
    n = rows * int(np.prod(trailing, dtype=np.int64))
    v = (np.arange(n, dtype=np.float64) * 0.37 + q * 1000.5) / 3.0
    if np.issubdtype(dtype, np.integer):
        v = (np.arange(n) * 7 + q * 31) % 251 - 120
    return v.astype(dtype).reshape((rows,) + tuple(trailing))


def _counts():
    return dict(_lib.algorithm_counts())


def _flat_allgather():
    """The allgather's flat path: the ring over the links (Gloo), MPI_Allgatherv (MPI)."""
    return "allgather/" + ("backend" if hvd.mpi_enabled() else "ring")


def _delta(before, after, key):
    return after.get(key, 0) - before.get(key, 0)


def check_algorithms(ck, expected_path):
    n, r = hvd.size(), hvd.rank()
    before = _counts()
    # Allreduce: sizes that take the cross gather, the cross ring (or MPI_Allreduce),
    # chunks smaller than the number of local ranks; sum and average.
    runs = 0
    for count in (1, 3, 1000, 300001):
        for dtype in (np.float32, np.int32, np.float64):
            x = _rank_input(r, count, dtype)
            want = sum(_rank_input(q, count, np.int64) for q in range(n))
            got = hvd.allreduce(tf.constant(x), op=hvd.Sum,
                                name="hier_sum_%d_%s" % (count, np.dtype(dtype).name)).numpy()
            runs += 1
            ck.equal("hierarchical allreduce sum count=%d %s" % (count, np.dtype(dtype).name),
                     (got.dtype, got.tolist() == want.astype(dtype).tolist()),
                     (np.dtype(dtype), True))
    x = _rank_input(r, 4096, np.float32)
    got = hvd.allreduce(tf.constant(x), op=hvd.Average, name="hier_avg").numpy()
    want = sum(_rank_input(q, 4096, np.float64) for q in range(n)) / n
    ck.close("hierarchical allreduce average", got, want.astype(np.float32), rtol=1e-6)
    # Sums that round: the same bits on every rank.
    x = (np.sin(np.arange(70000, dtype=np.float64) * (r + 1)) / 7.0).astype(np.float32)
    got = hvd.allreduce(tf.constant(x), op=hvd.Sum, name="hier_rounding").numpy()
    everyone = hvd.allgather(tf.constant(got.view(np.int32)[None, :]),
                             name="hier_rounding_bits").numpy()
    ck.expect(all(np.array_equal(everyone[0], row) for row in everyone),
              "hierarchical allreduce: the same bits on every rank",
              "ranks disagree on the bits of a rounded sum")
    runs += 3

    # Allgather: ragged first dimensions (rank 1 contributes no rows), several dtypes and
    # trailing shapes, one block larger than a socket piece; byte for byte in rank order.
    gathers = 0
    for rows_of, trailing, dtype in (
            (lambda q: q + 1 if q != 1 else 0, (3, 2), np.float32),
            (lambda q: 2 * q + 1, (), np.float64),
            (lambda q: (q * 5) % 4 + 1, (5,), np.int8),
            (lambda q: 40000 + 999 * q, (3,), np.float32)):
        blocks = [_gather_block(q, rows_of(q), trailing, dtype) for q in range(n)]
        want = np.concatenate(blocks, axis=0)
        got = hvd.allgather(tf.constant(blocks[r]),
                            name="hier_gather_%s_%d" % (np.dtype(dtype).name, len(trailing)))
        got = got.numpy()
        gathers += 1
        ck.equal("hierarchical allgather %s trailing=%s: dtype, shape" % (
            np.dtype(dtype).name, trailing), (got.dtype, got.shape), (want.dtype, want.shape))
        ck.expect(got.shape == want.shape and got.tobytes() == want.tobytes(),
                  "hierarchical allgather %s trailing=%s: bytes" % (np.dtype(dtype).name,
                                                                    trailing),
                  "differs from the blocks in rank order")
    # A whole batch through tf.function (several allgathers negotiated together).
    fn_blocks = [[_gather_block(q, q % 3 + k, (2,), np.float32) for q in range(n)]
                 for k in range(3)]
    outs = tf.function(lambda: [hvd.allgather(tf.constant(fn_blocks[k][r]),
                                              name="hier_fn_gather_%d" % k)
                                for k in range(3)])()
    for k in range(3):
        want = np.concatenate(fn_blocks[k], axis=0)
        ck.expect(outs[k].numpy().tobytes() == want.tobytes(),
                  "hierarchical allgather in tf.function #%d" % k, "differs")
    gathers += 3

    after = _counts()
    hier_ar = _delta(before, after, "allreduce/hierarchical")
    hier_ag = _delta(before, after, "allgather/hierarchical")
    flat_ag = _delta(before, after, _flat_allgather())
    if expected_path == "hierarchical":
        # Fusion may merge allreduces, so at least one run each; every allgather is its own.
        ck.expect(hier_ar >= 1, "the hierarchical allreduce ran",
                  "algorithm counts %s -> %s" % (before, after))
        ck.expect(hier_ag >= gathers, "the hierarchical allgather ran for every allgather",
                  "%d of %d; counts %s" % (hier_ag, gathers, after))
        ck.equal("flat allgathers run", flat_ag, 0)
    else:
        ck.equal("hierarchical runs on uneven hosts", (hier_ar, hier_ag), (0, 0))
        ck.expect(flat_ag >= gathers, "the flat allgather ran",
                  "%d of %d; counts %s" % (flat_ag, gathers, after))


def check_process_sets(ck):
    """On h1:2,h2:2 (ranks 0,1 on h1, 2,3 on h2) with the knobs on: a set with one rank
    per host is hierarchical, an uneven set flat; both exact."""
    n, r = hvd.size(), hvd.rank()
    if n != 4 or os.environ.get("HOROVOD_DYNAMIC_PROCESS_SETS") != "1":
        return
    for ranks, path in (([0, 2], "allgather/hierarchical"), ([0, 1, 3], _flat_allgather())):
        ps = hvd.add_process_set(ranks)
        if r in ranks:
            before = _counts()
            blocks = [_gather_block(q, q + 1, (2,), np.float32) for q in ranks]
            got = hvd.allgather(tf.constant(blocks[ranks.index(r)]), process_set=ps,
                                name="hier_set_gather").numpy()
            ck.expect(got.tobytes() == np.concatenate(blocks).tobytes(),
                      "allgather in process set %s" % ranks, "differs from rank order")
            x = _rank_input(r, 1000, np.float32)
            got = hvd.allreduce(tf.constant(x), op=hvd.Sum, process_set=ps,
                                name="hier_set_sum").numpy()
            want = sum(_rank_input(q, 1000, np.int64) for q in ranks).astype(np.float32)
            ck.equal("allreduce in process set %s" % ranks, got.tolist(), want.tolist())
            after = _counts()
            ck.equal("process set %s: allgather path" % ranks,
                     _delta(before, after, path), 1)
            if path == "allgather/hierarchical":
                ck.equal("process set %s: allreduce path" % ranks,
                         _delta(before, after, "allreduce/hierarchical"), 1)
            else:
                ck.equal("process set %s: no hierarchical run" % ranks,
                         _delta(before, after, "allreduce/hierarchical") +
                         _delta(before, after, "allgather/hierarchical"), 0)
        hvd.remove_process_set(ps)

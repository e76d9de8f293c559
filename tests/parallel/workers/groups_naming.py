"""Grouped allreduce as a group, and unnamed eager collectives that stay in step.

Run under the launcher (see collective_launch.py); sections:
* groups: exact results of groups of mixed dtypes and shapes; a group whose
  members reach the core at different times on different ranks; a group with
  one member mismatching on one rank fails as a whole, on every rank, with one
  FailedPreconditionError naming the group, the tensor and what differed;
* naming: rank 1 issues one extra unnamed allreduce that fails on rank 1 only;
  then 20 unnamed eager allreduces give exact sums on every rank (no stall);
  several unnamed allreduces in flight at once on one rank complete in order.
"""

import sys
import threading
import time

import numpy as np
import tensorflow as tf

import tf_hvd as hvd

import checklib

FPE = tf.errors.FailedPreconditionError  # mismatches across ranks, as Horovod


def _member_values(n, r, i, dtype, shape):
    size = int(np.prod(shape)) if shape else 1
    base = np.arange(size).reshape(shape) if shape else np.array(0)
    return (base + 10 * i + r).astype(dtype)


def check_groups(ck, n, r):
    specs = [(np.float32, [3]), (np.float64, [2, 2]), (np.int32, [5]), (np.float32, []),
             (np.int64, [1, 3]), (np.float16, [4]), (np.float32, [2, 3, 1])]
    xs = [_member_values(n, r, i, d, s) for i, (d, s) in enumerate(specs)]
    want = [sum(_member_values(n, k, i, d, s) for k in range(n)) for i, (d, s) in
            enumerate(specs)]
    for label, name in (("named", "mixed_group"), ("unnamed", None)):
        for step in range(3):  # later steps come from the response cache
            outs = hvd.grouped_allreduce([tf.constant(x) for x in xs], op=hvd.Sum, name=name)
            for i, (out, w) in enumerate(zip(outs, want)):
                ck.close("group %s step %d member %d" % (label, step, i), out, w)
    outs = hvd.grouped_allreduce([tf.constant(x) for x in xs], op=hvd.Average,
                                 name="mixed_avg")
    for i, (out, w, (d, _)) in enumerate(zip(outs, want, specs)):
        expect = (w / n).astype(d) if np.issubdtype(d, np.floating) else (w // n).astype(d)
        ck.close("group average member %d" % i, out, expect)

    # Members reach the core at different times on different ranks: rank r waits
    # r * 0.3 s; the group still runs (and fuses) together.
    for step in range(2):
        time.sleep(0.3 * r)
        outs = hvd.grouped_allreduce([tf.constant(x) for x in xs], op=hvd.Sum,
                                     name="late_group")
        for i, (out, w) in enumerate(zip(outs, want)):
            ck.close("late group step %d member %d" % (step, i), out, w)

    # One member mismatching on one rank: the whole group fails on every rank.
    odd = r == 1

    def bad_group():
        return hvd.grouped_allreduce(
            [tf.ones([2]), tf.ones([3] if odd else [4]), tf.ones([2], tf.int32)],
            op=hvd.Sum, name="bad_group")
    e = ck.raises("group member mismatch", bad_group, FPE,
                  ["bad_group", "bad_group_1", "none of its tensors ran",
                   checklib.shape_forms([4]), checklib.shape_forms([3])])
    if e is not None:
        ck.log("group error: %s" % checklib.error_text(e).strip()[:300])
    # A group the cache knows, changed on one rank only: renegotiated and failed.
    def cached_changed():
        return hvd.grouped_allreduce(
            [tf.constant(x) for x in xs[:-1]] + [tf.zeros([7] if odd else [2, 3, 1])],
            op=hvd.Sum, name="mixed_group")
    ck.raises("cached group changed on one rank", cached_changed, FPE,
              ["mixed_group", "mixed_group_6"])
    outs = hvd.grouped_allreduce([tf.constant(x) for x in xs], op=hvd.Sum, name="mixed_group")
    for i, (out, w) in enumerate(zip(outs, want)):
        ck.close("group after errors member %d" % i, out, w)

    # Inside tf.function the group is one op as well.
    @tf.function
    def fn(a, b):
        return hvd.grouped_allreduce([a, b], op=hvd.Sum)
    a, b = fn(tf.constant(xs[0]), tf.constant(xs[2]))
    ck.close("group in tf.function a", a, want[0])
    ck.close("group in tf.function b", b, want[2])


def check_naming(ck, n, r):
    if r == 1:
        # One extra unnamed allreduce that fails on this rank only.
        try:
            hvd.allreduce(tf.constant(["not a number"]))
            ck.fail("extra failing allreduce", "did not raise")
        except (tf.errors.InvalidArgumentError, TypeError, ValueError, tf.errors.NotFoundError):
            ck.passed()
    for step in range(20):
        out = hvd.allreduce(tf.fill([1024], float(r + step)), op=hvd.Sum)
        ck.close("unnamed allreduce %d" % step, out,
                 np.full([1024], n * step + n * (n - 1) / 2.0, np.float32))
    # Same name, another shape: renegotiated, still correct.
    out = hvd.allreduce(tf.fill([3], float(r)), op=hvd.Sum)
    ck.close("unnamed allreduce new shape", out, np.full([3], n * (n - 1) / 2.0, np.float32))
    out = hvd.allgather(tf.fill([r + 1], r))
    ck.close("unnamed allgather", out, np.concatenate([np.full([k + 1], k) for k in
                                                       range(n)]).astype(np.int32))

    # Several unnamed allreduces in flight at once: on each rank thread k
    # starts 0.5 s after thread k-1 (rank 0 half a second late, so the others
    # queue up); the k-th call of every rank is reduced with the k-th of the others.
    count = 4
    results = [None] * count

    def worker(k):
        results[k] = hvd.allreduce(tf.fill([5], float((k + 1) * (r + 1))), op=hvd.Sum)

    if r == 0:
        time.sleep(0.5)
    threads = []
    for k in range(count):
        t = threading.Thread(target=worker, args=(k,))
        t.start()
        threads.append(t)
        time.sleep(0.5)
    for t in threads:
        t.join(120)
    total = n * (n + 1) / 2.0
    for k in range(count):
        ck.expect(results[k] is not None, "in-flight allreduce %d finished" % k)
        if results[k] is not None:
            ck.close("in-flight allreduce %d" % k, results[k],
                     np.full([5], (k + 1) * total, np.float32))
    out = hvd.allreduce(tf.constant([1.0]), op=hvd.Sum)
    ck.close("unnamed allreduce after threads", out, np.array([float(n)], np.float32))


def main():
    args = checklib.parse_args()
    hvd.init()
    n, r = hvd.size(), hvd.rank()
    ck = checklib.Checker(r, n, args.result_dir, args.only)
    ck.section("groups", check_groups, ck, n, r)
    ck.section("naming", check_naming, ck, n, r)
    code = ck.finish()
    hvd.shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())

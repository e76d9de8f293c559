"""Collective checks in TF2: eagerly and inside tf.function (one process per rank).

Run under the launcher, e.g.
    python -m tf_hvd.runner -np 2 python tests/parallel/workers/collectives_tf2.py \
        --np 2 --transport gloo --result-dir /tmp/r
Prints ``[rank r] OK <n> checks`` on success; exits 1 with the failed checks otherwise.
"""

import os
import sys
import time

import numpy as np
import tensorflow as tf

import tf_hvd as hvd

import checklib
import collective_cases as cc
import error_checks


def check_topology(ck, args):
    n = args.np
    ck.equal("is_initialized", hvd.is_initialized(), True)
    ck.equal("size", hvd.size(), n)
    ck.expect(0 <= hvd.rank() < n, "rank", "rank %d out of range" % hvd.rank())
    ck.equal("local_size", hvd.local_size(), n)
    ck.equal("local_rank", hvd.local_rank(), hvd.rank())
    ck.equal("cross_size", hvd.cross_size(), 1)
    ck.equal("cross_rank", hvd.cross_rank(), 0)
    ck.equal("is_homogeneous", hvd.is_homogeneous(), True)
    ck.equal("mpi_enabled", hvd.mpi_enabled(), args.transport == "mpi")
    ck.equal("gloo_enabled", hvd.gloo_enabled(), args.transport == "gloo")
    ck.equal("mpi_built", hvd.mpi_built(), True)
    ck.equal("gloo_built", hvd.gloo_built(), True)
    ck.equal("init again is a no-op", hvd.init(), None)
    ck.equal("size after second init", hvd.size(), n)
    # Ranks share this host: hvd.init() split the cores and stopped spinning
    # (unless the knob turned that off; the knob variants check it is passed).
    from tf_hvd import tf_threads
    threads = tf_threads.tf_thread_settings()
    ck.equal("caching CPU allocator", threads.get("caching_allocator"), True)
    if os.environ.get("HOROVOD_TF_THREADS") == "0":
        ck.equal("tf threads left alone", threads.get("configured"), False)
    else:
        # "cores": what this rank could use before init bound it to its share.
        cores = threads.get("cores", 0)
        ck.equal("tf threads configured", threads.get("configured"), True)
        ck.equal("intra-op threads", tf.config.threading.get_intra_op_parallelism_threads(),
                 max(1, cores // n))
        if cores >= n and os.environ.get("HOROVOD_CPU_BIND") != "0":
            # Bound to its own slice: every thread, and the slices of the ranks differ.
            mine = sorted(os.sched_getaffinity(0))
            ck.equal("bound CPUs", threads.get("cpus"), mine)
            ck.equal("CPUs per rank", len(mine), cores // n)
            for tid in os.listdir("/proc/self/task"):
                try:
                    ck.equal("thread %s CPUs" % tid, sorted(os.sched_getaffinity(int(tid))), mine)
                except ProcessLookupError:
                    pass
            firsts = hvd.allgather(tf.constant([mine[0]], tf.int32), name="bound_cpus").numpy()
            ck.equal("ranks on distinct CPUs", len(set(firsts.tolist())), n)
        else:
            ck.equal("not bound", "cpus" in threads, False)
        from tensorflow.python.eager import context
        ck.equal("thread spinning off",
                 context.context().config.experimental.disable_thread_spinning, True)
    for item in args.expect_env:
        key, _, value = item.partition("=")
        ck.equal("environment %s" % key, os.environ.get(key), value)


def check_repeated(ck, n, r):
    """The same named allreduce many times (response cache steady state), values change."""
    for step in range(25):
        x = np.full([3, 2], r * 10 + step, np.float32)
        out = hvd.allreduce(x, op=hvd.Sum, name="repeated_grad")
        exp = np.full([3, 2], sum(q * 10 + step for q in range(n)), np.float32)
        ck.close("repeated allreduce step %d" % step, out, exp)
    # Alternating two names and ops.
    for step in range(10):
        a = hvd.allreduce(tf.constant([float(r + step)]), op=hvd.Max, name="alt_a")
        b = hvd.allgather(tf.constant([[r, step]]), name="alt_b")
        ck.close("alternating max %d" % step, a, np.array([n - 1 + step], np.float32))
        ck.close("alternating gather %d" % step, b,
                 np.array([[q, step] for q in range(n)], np.int32))


def check_barrier(ck, n, r):
    if r == 0:
        time.sleep(0.6)
    t0 = time.time()
    res = hvd.barrier()
    waited = time.time() - t0
    ck.equal("barrier returns None eagerly", res, None)
    if r != 0:
        ck.expect(waited > 0.3, "barrier waits for the slow rank",
                  "rank %d left the barrier after %.2fs, rank 0 arrived 0.6s late" % (r, waited))
    # A barrier right after another one.
    hvd.barrier()
    ck.passed()


def check_join(ck, n, r):
    """Rank r issues r+1 allreduces then joins: joined ranks contribute zeros."""
    for i in range(r + 1):
        x = np.array([(r + 1) * 10 + i, -(r + 1), 7], np.float32)
        out = hvd.allreduce(x, op=hvd.Sum, name="join_ar_%d" % i)
        exp = np.array([sum((q + 1) * 10 + i for q in range(i, n)),
                        sum(-(q + 1) for q in range(i, n)), 7 * (n - i)], np.float32)
        ck.close("allreduce %d with ranks < %d joined" % (i, i), out, exp)
        xi = np.array([r + 1, 2], np.int64)
        out = hvd.allreduce(xi, op=hvd.Sum, name="join_ar_int_%d" % i)
        exp = np.array([sum(q + 1 for q in range(i, n)), 2 * (n - i)], np.int64)
        ck.close("int64 allreduce %d with ranks < %d joined" % (i, i), out, exp)
    last = hvd.join()
    ck.close("join returns the last rank to join", last, np.int32(n - 1))
    # Everything works normally afterwards, and joining again works.
    out = hvd.allreduce(np.array([r + 1.0], np.float32), op=hvd.Sum, name="after_join")
    ck.close("allreduce after join", out, np.array([n * (n + 1) / 2], np.float32))
    last = int(hvd.join().numpy())
    ck.expect(0 <= last < n, "second join", "returned %d" % last)


def check_variables(ck, n, r):
    import keras
    for root in range(n):
        tvars = [tf.Variable(np.full([3, 4], r + 0.5, np.float32)),
                 tf.Variable(np.arange(5, dtype=np.int32) * (r + 1)),
                 tf.Variable(np.array([r % 2 == 0, True])),
                 tf.Variable(np.float64(r)),
                 tf.Variable(np.array([r, 7], np.uint32)),      # travels as bytes
                 tf.Variable(np.array([r + 1j * r], np.complex64))]
        kvars = [keras.Variable(np.full([2, 2], r * 2.0, np.float32), name="kernel"),
                 keras.Variable(np.full([2], r * 3.0, np.float32), name="kernel")]
        ck.equal("keras.Variable is not a tf.Variable (test premise)",
                 isinstance(kvars[0], tf.Variable), False)
        ret = hvd.broadcast_variables(tvars + kvars, root_rank=root)
        ck.equal("broadcast_variables returns None eagerly", ret, None)
        ck.close("bcast tf.Variable f32 root=%d" % root, tvars[0].numpy(),
                 np.full([3, 4], root + 0.5, np.float32))
        ck.close("bcast tf.Variable i32 root=%d" % root, tvars[1].numpy(),
                 np.arange(5, dtype=np.int32) * (root + 1))
        ck.close("bcast tf.Variable bool root=%d" % root, tvars[2].numpy(),
                 np.array([root % 2 == 0, True]))
        ck.close("bcast tf.Variable f64 scalar root=%d" % root, tvars[3].numpy(),
                 np.float64(root))
        ck.close("bcast tf.Variable uint32 root=%d" % root, tvars[4].numpy(),
                 np.array([root, 7], np.uint32))
        ck.close("bcast tf.Variable complex64 root=%d" % root, tvars[5].numpy(),
                 np.array([root + 1j * root], np.complex64))
        ck.close("bcast keras.Variable root=%d" % root, kvars[0].numpy(),
                 np.full([2, 2], root * 2.0, np.float32))
        ck.close("bcast keras.Variable 2 root=%d" % root, kvars[1].numpy(),
                 np.full([2], root * 3.0, np.float32))

    # Inside a tf.function.
    v = tf.Variable(np.full([4], float(r), np.float32))
    kv = keras.Variable(np.full([3], float(r) * 2, np.float32))

    @tf.function
    def bcast_in_function():
        hvd.broadcast_variables([v, kv], root_rank=n - 1)
        return tf.convert_to_tensor(v) + 0
    bcast_in_function()
    ck.close("broadcast_variables in tf.function", v.numpy(), np.full([4], n - 1.0, np.float32))
    ck.close("broadcast_variables keras in tf.function", kv.numpy(),
             np.full([3], (n - 1) * 2.0, np.float32))

    # A Keras model whose initial weights differ per rank.
    keras.utils.set_random_seed(1234 + r)
    model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(4, name="d1"),
                              keras.layers.Dense(2, name="d2")])
    hvd.broadcast_variables(model.variables, root_rank=0)
    flat = np.concatenate([np.ravel(w) for w in model.get_weights()])
    gathered = hvd.allgather(flat[None, :]).numpy()
    ck.expect(all(np.array_equal(gathered[0], gathered[q]) for q in range(n)),
              "keras model weights equal after broadcast_variables",
              "weights differ across ranks")
    ck.expect(not np.all(flat == 0), "keras model weights non-trivial")

    # Empty list.
    ck.equal("broadcast_variables([])", hvd.broadcast_variables([], 0), None)


def check_objects(ck, n, r):
    for root in range(n):
        obj = {"root": root, "rank": r, "data": list(range(r + 3)),
               "arr": np.arange(r + 1), "s": "x" * (1000 * r)} if r == root else None
        got = hvd.broadcast_object(obj, root_rank=root)
        ok = (isinstance(got, dict) and got["root"] == root and got["rank"] == root and
              got["data"] == list(range(root + 3)) and
              np.array_equal(got["arr"], np.arange(root + 1)) and got["s"] == "x" * (1000 * root))
        ck.expect(ok, "broadcast_object root=%d" % root, "got %r" % (got,))
    got = hvd.broadcast_object([r, "named"], root_rank=0, name="named_object")
    ck.equal("broadcast_object named", got, [0, "named"])
    got = hvd.allgather_object({"rank": r, "pad": "y" * r})
    ck.equal("allgather_object", got, [{"rank": q, "pad": "y" * q} for q in range(n)])
    got = hvd.allgather_object(r * 1.5, name="named_gather_object")
    ck.equal("allgather_object named", got, [q * 1.5 for q in range(n)])
    got = hvd.allgather_object(None)
    ck.equal("allgather_object None", got, [None] * n)
    check_objects_by_value(ck, n, r)


def check_objects_by_value(ck, n, r):
    """cloudpickle, as Horovod: lambdas, closures and classes defined in a function
    travel by value (plain pickle refuses them)."""
    offset = 100 * (r + 1)

    class Point(object):            # defined here, so pickle could not find it by name
        def __init__(self, x):
            self.x = x

        def shifted(self):
            return self.x + offset

    add = hvd.broadcast_object((lambda v: v + offset) if r == n - 1 else None,
                               root_rank=n - 1)
    ck.equal("broadcast_object lambda closure", add(1), 100 * n + 1)
    point = hvd.broadcast_object(Point(7) if r == 0 else None, root_rank=0)
    ck.equal("broadcast_object local class", (type(point).__name__, point.shifted()),
             ("Point", 107))
    bcast = hvd.broadcast_object_fn(root_rank=0, name="by_value_fn")
    ck.equal("broadcast_object_fn closure", bcast(lambda: offset)(), 100)
    fns = hvd.allgather_object(lambda: offset * 2)
    ck.equal("allgather_object closures", [f() for f in fns],
             [200 * (q + 1) for q in range(n)])


def check_paths(ck, n, r):
    """A reducescatter moves only the slices (shared memory on one host, else the ring
    over the links: never a whole allreduce of which each rank keeps its rows), and an
    allgather goes through shared memory on one host, else the ring over the links (Gloo)
    or MPI_Allgatherv; read from the core's counters."""
    from tf_hvd import _hvd
    shm = os.environ.get("HOROVOD_SHM_ALLREDUCE") != "0"
    before = dict(_hvd.algorithm_counts())
    x = tf.fill([n * 100003 + 1, 3], float(r + 1))
    got = hvd.reducescatter(x, op=hvd.Sum, name="path_reducescatter")
    rows = (n * 100003 + 1) // n + (1 if r < (n * 100003 + 1) % n else 0)
    ck.equal("reducescatter rows", got.shape[0], rows)
    ck.equal("reducescatter values", float(tf.reduce_max(tf.abs(got - n * (n + 1) / 2))), 0.0)
    hvd.allgather(tf.fill([100000 + r, 4], float(r)), name="path_allgather")
    after = dict(_hvd.algorithm_counts())
    moved = {k: after.get(k, 0) - before.get(k, 0) for k in after
             if after.get(k, 0) != before.get(k, 0) and k.split("/")[0] != "allreduce"}
    ck.equal("paths taken", moved, {
        "reducescatter/" + ("shared-memory" if shm else "ring"): 1,
        "allgather/" + ("shared-memory" if shm else "backend" if hvd.mpi_enabled()
                        else "ring"): 1})
    ck.equal("no allreduce for the reducescatter",
             [k for k in after if k.startswith("allreduce/")
              and after[k] != before.get(k, 0)], [])


def main():
    args = checklib.parse_args()
    hvd.init()
    n, r = hvd.size(), hvd.rank()
    ck = checklib.Checker(r, n, args.result_dir, args.only)
    ck.section("topology", check_topology, ck, args)
    if n != args.np:
        return ck.finish()
    probe = tf.function(lambda: hvd.allreduce(tf.constant([1.0]), op=hvd.Sum,
                                              name="folding_probe"))
    ck.section("function communicates", cc.check_communicates, ck, n, r, probe,
               "tf.function")
    cases = cc.all_cases(n, r)
    ck.section("cases eager", cc.run_cases, ck, cc.eager_subset(cases), "eager")
    ck.section("cases tf.function", cc.run_cases, ck, cases, "function")
    ck.section("repeated", check_repeated, ck, n, r)
    ck.section("paths", check_paths, ck, n, r)
    ck.section("barrier", check_barrier, ck, n, r)
    ck.section("join", check_join, ck, n, r)
    ck.section("variables", check_variables, ck, n, r)
    ck.section("objects", check_objects, ck, n, r)
    ck.section("errors", error_checks.run_all, ck, n, r)
    code = ck.finish()
    hvd.shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())

"""Process sets across processes (run under the launcher, see collective_launch.py).

Sets at np=N: EVEN (ranks 0, 2, ..), ODD (1, 3, ..) and OVER = 1..N-1, which
overlaps both. Sections:
* static: every collective exact on every set this rank belongs to, several
  dtypes and shapes, eager and in tf.function, unnamed calls of the same kind on
  two sets at once, broadcast_object/allgather_object/broadcast_variables,
  ProcessSet.size()/rank()/included(), size_op;
* independent: EVEN's first rank submits a tensor 4 s late; meanwhile OVER's
  members (one of them also in EVEN, waiting on it) run 10 allreduces, which
  must finish first; the stall warning names the set (checked by the test);
* errors: non-member, unknown and unregistered sets, broadcast root outside the
  set, a mismatch inside a set (named by set and global ranks), adding without
  HOROVOD_DYNAMIC_PROCESS_SETS, rank() on a non-member;
* training: DistributedOptimizer (Keras SGD) on EVEN and ODD at once, and
  DistributedGradientTape on OVER, equal to one process training on the set's
  data; the Keras callbacks with a process set;
* reinit: init with a duplicate entry or with lists that differ across ranks
  fails as Horovod's does; then init with process_sets="dynamic";
* dynamic: add, use, duplicate add, mismatched add, remove, re-add;
* comm: hvd.init(comm=<mpi4py Split communicator>) and comm=[2, 0] under MPI;
  on Gloo a subset is refused and the list of every rank accepted.
"""

import os
import sys
import threading
import time

import numpy as np
import tensorflow as tf

import tf_hvd as hvd

import checklib

IAE = tf.errors.InvalidArgumentError


def make_sets(n):
    even = hvd.ProcessSet(list(range(0, n, 2)))
    odd = hvd.ProcessSet(list(range(1, n, 2)))
    over = hvd.ProcessSet(list(range(1, n)))
    return even, odd, over


def value(r, shape, dtype, salt=0):
    size = int(np.prod(shape)) if shape else 1
    base = (np.arange(size) % 7).reshape(shape) if shape else np.array(0)
    return (base + 3 * r + salt).astype(dtype)


DTYPES = (np.float32, np.float64, np.int32, np.int64, np.float16, np.uint8)
SHAPES = ([], [5], [3, 4])


def check_static(ck, n, r, sets):
    labels = ("even", "odd", "over")
    for label, ps in zip(labels, sets):
        ck.equal("%s size" % label, ps.size(), len(ps.ranks))
        ck.equal("%s included" % label, ps.included(), r in ps.ranks)
        if r in ps.ranks:
            ck.equal("%s rank" % label, ps.rank(), ps.ranks.index(r))
            ck.equal("%s size_op" % label, int(hvd.size_op(process_set_id=ps.process_set_id)),
                     len(ps.ranks))
    ck.equal("global set", (hvd.global_process_set.process_set_id,
                            hvd.global_process_set.ranks), (0, list(range(n))))
    ck.equal("ids", [ps.process_set_id for ps in sets], [1, 2, 3])
    for label, ps in zip(labels, sets):
        if r not in ps.ranks:
            continue
        members = ps.ranks
        me = members.index(r)
        for dtype in DTYPES:
            # Every shape for float32, a 2-d one for the other dtypes.
            for shape in (SHAPES if dtype == np.float32 else SHAPES[-1:]):
                what = "%s %s %s" % (label, np.dtype(dtype).name, shape)
                x = value(r, shape, dtype)
                every = [value(k, shape, dtype) for k in members]
                total = np.sum(every, axis=0).astype(dtype)
                ck.close(what + " allreduce sum",
                         hvd.allreduce(x, op=hvd.Sum, process_set=ps), total)
                ck.close(what + " allreduce max",
                         hvd.allreduce(x, op=hvd.Max, process_set=ps),
                         np.max(every, axis=0).astype(dtype))
                if dtype in (np.float32, np.float64):
                    ck.close(what + " allreduce average",
                             hvd.allreduce(x, op=hvd.Average, process_set=ps),
                             (total / len(members)).astype(dtype), rtol=1e-6)
                root = members[-1]
                ck.close(what + " broadcast",
                         hvd.broadcast(x, root_rank=root, process_set=ps),
                         value(root, shape, dtype))
                if not shape:
                    continue
                mine = value(r, [me + 1] + shape[1:], dtype)
                ck.close(what + " allgather", hvd.allgather(mine, process_set=ps),
                         np.concatenate([value(k, [i + 1] + shape[1:], dtype)
                                         for i, k in enumerate(members)]))
                rows = [(i + me) % 3 for i in range(len(members))]
                send = value(r, [sum(rows)] + shape[1:], dtype)
                out, received = hvd.alltoall(send, splits=rows, process_set=ps)
                parts = []
                for i, k in enumerate(members):
                    their = [(j + i) % 3 for j in range(len(members))]
                    start = sum(their[:me])
                    parts.append(value(k, [sum(their)] + shape[1:], dtype)[start:start + their[me]])
                ck.close(what + " alltoall", out, np.concatenate(parts))
                ck.close(what + " alltoall splits", received,
                         np.array([(me + i) % 3 for i in range(len(members))], np.int32))
                if dtype != np.uint8:
                    big = value(r, [2 * len(members) + 1] + shape[1:], dtype)
                    full = np.sum([value(k, [2 * len(members) + 1] + shape[1:], dtype)
                                   for k in members], axis=0).astype(dtype)
                    first = 2 * me + min(me, 1)
                    ck.close(what + " reducescatter",
                             hvd.reducescatter(big, op=hvd.Sum, process_set=ps),
                             full[first:first + 2 + (1 if me < 1 else 0)])
        # Gradients within the set, as Horovod defines them: allgather's is the
        # set's average of the incoming gradients, then this rank's rows.
        x = tf.Variable([1.0, 2.0])
        weights = tf.range(2 * len(members), dtype=tf.float32)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(hvd.allgather(x, process_set=ps) * weights)
        ck.close(label + " allgather gradient", tape.gradient(loss, x),
                 np.arange(2 * me, 2 * me + 2, dtype=np.float32))
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(hvd.allreduce(x * float(r + 1), op=hvd.Sum, process_set=ps))
        ck.close(label + " allreduce gradient", tape.gradient(loss, x),
                 np.full([2], len(members) * float(r + 1), np.float32))
        # Large enough for the shared-memory path (the set's own regions) unless
        # the job turned it off (then the ring over the members' links).
        big = np.arange(70000, dtype=np.float32) % 13 + r
        ck.close(label + " large allreduce", hvd.allreduce(big, op=hvd.Sum, process_set=ps),
                 np.sum([np.arange(70000, dtype=np.float32) % 13 + k for k in members], axis=0))
        # Grouped ops, tf.function, barrier, objects, variables.
        xs = [value(r, [4], np.float32, salt=1), value(r, [2, 2], np.int32, salt=2)]
        want = [np.sum([value(k, [4], np.float32, 1) for k in members], axis=0),
                np.sum([value(k, [2, 2], np.int32, 2) for k in members], axis=0).astype(np.int32)]
        ck.close(label + " grouped_allreduce",
                 hvd.grouped_allreduce(xs, op=hvd.Sum, process_set=ps), want)
        got = hvd.grouped_allgather([tf.constant([r]), tf.constant([[r, r]])], process_set=ps)
        ck.close(label + " grouped_allgather", got,
                 [np.array(members, np.int32), np.array([[k, k] for k in members], np.int32)])

        @tf.function
        def fn(t):
            return hvd.allreduce(t, op=hvd.Sum, name="in_function", process_set=ps)
        for step in range(3):  # later steps hit the set's response cache
            ck.close("%s tf.function step %d" % (label, step), fn(tf.fill([3], float(r + step))),
                     np.full([3], sum(members) + step * len(members), np.float32))
        hvd.barrier(process_set=ps)
        ck.passed()
        ck.equal(label + " allgather_object",
                 hvd.allgather_object({"rank": r}, process_set=ps), [{"rank": k} for k in members])
        ck.equal(label + " broadcast_object",
                 hvd.broadcast_object("from %d" % r, root_rank=members[0], process_set=ps),
                 "from %d" % members[0])
        v = tf.Variable(tf.fill([3], float(r)))
        hvd.broadcast_variables([v], root_rank=members[-1], process_set=ps)
        ck.close(label + " broadcast_variables", v, np.full([3], float(members[-1]), np.float32))
    # Unnamed calls of one kind on two sets at once: each set matches its own.
    even, odd, over = sets
    mine = [ps for ps in sets if r in ps.ranks]
    results = {}

    def run(ps):
        results[ps.process_set_id] = hvd.allreduce(tf.constant([float(r + 1)]), op=hvd.Sum,
                                                   process_set=ps)
    threads = [threading.Thread(target=run, args=(ps,)) for ps in mine]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for ps in mine:
        ck.close("concurrent unnamed on set %d" % ps.process_set_id, results.get(ps.process_set_id),
                 np.array([float(sum(k + 1 for k in ps.ranks))], np.float32))
    ck.close("global after sets", hvd.allreduce(tf.constant([1.0]), op=hvd.Sum),
             np.array([float(n)], np.float32))


def check_independent(ck, n, r, sets):
    even, odd, over = sets
    late = {}
    if r in even.ranks:
        def stalled():
            if r == even.ranks[0]:
                time.sleep(4.0)
            late["value"] = hvd.allreduce(tf.constant([float(r)]), op=hvd.Sum, name="stall.a",
                                          process_set=even)
            late["time"] = time.time()
        t = threading.Thread(target=stalled)
        t.start()
    if r in over.ranks:
        t0 = time.time()
        for i in range(10):
            out = hvd.allreduce(tf.constant([float(i)]), op=hvd.Sum, process_set=over)
        ck.close("over during even's stall", out, np.array([9.0 * len(over.ranks)], np.float32))
        done = time.time()
        ck.expect("value" not in late, "over finished while even waited",
                  "even's allreduce finished first")
        ck.log("over's 10 allreduces took %.2f s while even waited" % (done - t0))
    if r in even.ranks:
        t.join(60)
        ck.close("even after its stall", late.get("value"),
                 np.array([float(sum(even.ranks))], np.float32))
    hvd.barrier()


def check_errors(ck, n, r, sets):
    even, odd, over = sets
    outside = even if r not in even.ranks else odd
    e = ck.raises("non-member allreduce", lambda: hvd.allreduce(tf.ones([2]), process_set=outside),
                  IAE, ["Allreduce: Rank %d is not a member of the provided process set" % r,
                        "process set %d (ranks %s)" % (outside.process_set_id,
                                                       ", ".join(map(str, outside.ranks)))])
    ck.raises("non-member allgather", lambda: hvd.allgather(tf.ones([2]), process_set=outside),
              IAE, ["Allgather: Rank %d is not a member" % r])
    ck.raises("non-member rank()", outside.rank, ValueError,
              ["Process is not part of provided process set."])
    bogus = hvd.ProcessSet([0])
    bogus.process_set_id = 99
    # As Horovod: ValueError when the op is built, not an op error when it runs.
    ck.raises("unknown set", lambda: hvd.allreduce(tf.ones([2]), process_set=bogus),
              ValueError, ["Process set does not exist or has not been registered "
                           "(process set id 99)"])
    ck.raises("unregistered set", lambda: hvd.allreduce(tf.ones([2]),
                                                        process_set=hvd.ProcessSet([0, 1])),
              ValueError, ["is not registered"])
    ck.raises("add without dynamic", lambda: hvd.add_process_set([0, 1]), ValueError,
              ["HOROVOD_DYNAMIC_PROCESS_SETS=1"])
    ck.raises("ProcessSet of strings", lambda: hvd.ProcessSet(["a"]), ValueError,
              ["list of process ranks"])
    if r in over.ranks:
        ck.raises("broadcast root outside", lambda: hvd.broadcast(tf.ones([2]), root_rank=0,
                                                                  process_set=over),
                  IAE, ["invalid root rank 0", "process set 3"])
        # A mismatch inside the set: named with the set and global ranks.
        last = over.ranks[-1]
        shape = [3] if r == last else [2]
        others = ",".join(str(k) for k in over.ranks if k != last)
        ck.raises("mismatch in set", lambda: hvd.allreduce(tf.ones(shape), name="mm",
                                                           process_set=over),
                  tf.errors.FailedPreconditionError,
                  ["process set 3 (ranks %s)" % ", ".join(map(str, over.ranks)),
                        "tensor 'mm': mismatched shape",
                        "on rank%s %s" % ("s" if len(over.ranks) > 2 else "", others),
                        "[3] on rank %d" % last])
        ck.close("set works after mismatch",
                 hvd.allreduce(tf.ones([2]), op=hvd.Sum, process_set=over),
                 np.full([2], float(len(over.ranks)), np.float32))
    hvd.barrier()


def _model(seed):
    import keras
    model = keras.Sequential([keras.Input([4]), keras.layers.Dense(3)])
    rng = np.random.RandomState(seed)
    model.set_weights([rng.randn(4, 3).astype(np.float32), rng.randn(3).astype(np.float32)])
    return model


def _shard(k):
    rng = np.random.RandomState(100 + k)
    return rng.randn(8, 4).astype(np.float32), rng.randn(8, 3).astype(np.float32)


def _loss(model, x, y):
    return tf.reduce_mean(tf.square(model(x) - y))


def check_training(ck, n, r, sets):
    import keras
    even, odd, over = sets
    steps = 4
    # DistributedOptimizer on the disjoint sets at once.
    for ps in (even, odd):
        if r not in ps.ranks:
            continue
        model = _model(7)
        opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.1), process_set=ps)
        x, y = _shard(r)
        for _ in range(steps):
            with tf.GradientTape() as tape:
                loss = _loss(model, x, y)
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
        # One process on the set's data: the mean over equal shards is the mean of the means.
        ref = _model(7)
        ref_opt = keras.optimizers.SGD(0.1)
        xs = np.concatenate([_shard(k)[0] for k in ps.ranks])
        ys = np.concatenate([_shard(k)[1] for k in ps.ranks])
        for _ in range(steps):
            with tf.GradientTape() as tape:
                loss = _loss(ref, xs, ys)
            ref_opt.apply_gradients(zip(tape.gradient(loss, ref.trainable_variables),
                                        ref.trainable_variables))
        ck.close("DistributedOptimizer on set %d" % ps.process_set_id, model.get_weights(),
                 ref.get_weights(), rtol=1e-5, atol=1e-6)
    # DistributedGradientTape on the overlapping set, inside tf.function.
    if r in over.ranks:
        model = _model(8)
        opt = keras.optimizers.SGD(0.05)
        x, y = _shard(r)

        @tf.function
        def step():
            with tf.GradientTape() as tape:
                loss = _loss(model, x, y)
            tape = hvd.DistributedGradientTape(tape, process_set=over)
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
        for _ in range(steps):
            step()
        ref = _model(8)
        ref_opt = keras.optimizers.SGD(0.05)
        xs = np.concatenate([_shard(k)[0] for k in over.ranks])
        ys = np.concatenate([_shard(k)[1] for k in over.ranks])
        for _ in range(steps):
            with tf.GradientTape() as tape:
                loss = _loss(ref, xs, ys)
            ref_opt.apply_gradients(zip(tape.gradient(loss, ref.trainable_variables),
                                        ref.trainable_variables))
        ck.close("DistributedGradientTape on set 3", model.get_weights(), ref.get_weights(),
                 rtol=1e-5, atol=1e-6)
        # Keras callbacks on the set.
        from tf_hvd.keras.callbacks import (BroadcastGlobalVariablesCallback,
                                            MetricAverageCallback)
        m = _model(20 + r)
        cb = BroadcastGlobalVariablesCallback(over.ranks[-1], process_set=over)
        cb.set_model(m)
        cb.on_train_batch_end(0)
        ck.close("BroadcastGlobalVariablesCallback", m.get_weights(),
                 _model(20 + over.ranks[-1]).get_weights())
        logs = {"loss": float(r)}
        MetricAverageCallback(process_set=over).on_epoch_end(0, logs)
        ck.close("MetricAverageCallback", logs["loss"], np.mean(over.ranks), rtol=1e-12)
    hvd.barrier()


def check_reinit(ck, n, r, sets):
    hvd.shutdown()
    a, b = hvd.ProcessSet([0, 1]), hvd.ProcessSet([1, 0])
    ck.raises("duplicate entry", lambda: hvd.init(process_sets=[a, b]), ValueError,
              ["process_sets entry number 1 is a duplicate"])
    ck.equal("duplicate invalidated", (a.process_set_id, b.process_set_id), (1, None))
    hvd.shutdown()
    differs = [hvd.ProcessSet([0, r])] if r > 0 else [hvd.ProcessSet([0, 1])]
    ck.raises("lists differ", lambda: hvd.init(process_sets=differs), RuntimeError,
              ["must list the same process sets on every rank"])
    hvd.shutdown()
    hvd.init(process_sets="dynamic")
    ck.equal("dynamic env", os.environ.get("HOROVOD_DYNAMIC_PROCESS_SETS"), "1")


def check_dynamic(ck, n, r):
    pair = hvd.add_process_set([1, 0])
    ck.equal("added", (pair.process_set_id, pair.ranks), (1, [0, 1]))
    if r in pair.ranks:
        ck.close("allreduce on added", hvd.allreduce(tf.constant([2.0]), op=hvd.Sum,
                                                     process_set=pair), np.array([4.0], np.float32))
    ck.raises("duplicate add", lambda: hvd.add_process_set(hvd.ProcessSet([0, 1])), ValueError,
              ["Attempted to add a duplicate process set"])
    mine = [1, 2] if r < 2 else [0, 2]  # no such set yet on any rank
    ck.raises("mismatched add", lambda: hvd.add_process_set(mine), ValueError,
              ["must be called by every rank with the same arguments", "[1, 2] on rank 0",
               "[0, 2] on rank 2"])
    tail = hvd.add_process_set(list(range(1, n)))
    ck.equal("second id", tail.process_set_id, 2)
    if r in tail.ranks:
        ck.close("allreduce on second", hvd.allreduce(tf.constant([1.0]), op=hvd.Sum,
                                                      process_set=tail),
                 np.array([float(n - 1)], np.float32))
    ck.equal("remove", hvd.remove_process_set(pair), True)
    ck.equal("removed invalidated", pair.process_set_id, None)
    ck.equal("remove again", hvd.remove_process_set(pair), False)
    ck.equal("remove global", hvd.remove_process_set(hvd.global_process_set), False)
    ck.raises("use removed", lambda: hvd.allreduce(tf.ones([1]), process_set=pair), ValueError,
              ["is not registered"])
    again = hvd.add_process_set([0, 1])
    ck.equal("re-added id", again.process_set_id, 3)
    if r in again.ranks:
        ck.close("allreduce on re-added", hvd.allreduce(tf.constant([3.0]), op=hvd.Sum,
                                                        process_set=again),
                 np.array([6.0], np.float32))
    ck.close("global at the end", hvd.allreduce(tf.constant([1.0]), op=hvd.Sum),
             np.array([float(n)], np.float32))


def check_comm(ck, n, r, transport):
    """hvd.init(comm=...): a sub-communicator or a list of ranks is the job
    under MPI; on Gloo only the list of every rank is accepted."""
    hvd.shutdown()
    if transport != "mpi":
        ck.raises("comm subset on gloo", lambda: hvd.init(comm=[0]), RuntimeError,
                  ["a subset needs MPI"])
        hvd.shutdown()
        hvd.init(comm=list(range(n)))
        ck.equal("comm of every rank", (hvd.size(), hvd.rank()), (n, r))
        return
    from mpi4py import MPI
    sub = MPI.COMM_WORLD.Split(r % 2, r)  # while no background thread uses MPI
    hvd.init(comm=sub)
    ck.equal("comm=Split size/rank", (hvd.size(), hvd.rank()), (sub.Get_size(), sub.Get_rank()))
    members = [k for k in range(n) if k % 2 == r % 2]
    ck.close("comm=Split allreduce", hvd.allreduce(tf.constant([float(r)]), op=hvd.Sum),
             np.array([float(sum(members))], np.float32))
    hvd.shutdown()
    listed = [2, 0]
    if r in listed:
        hvd.init(comm=listed)
        ck.equal("comm=[2, 0] size/rank", (hvd.size(), hvd.rank()), (2, listed.index(r)))
        ck.close("comm=[2, 0] allgather", hvd.allgather(tf.constant([r])),
                 np.array(listed, np.int32))
        hvd.shutdown()
    sub.Free()
    # Every rank ends initialized over the whole world again.
    hvd.init()
    ck.close("world again", hvd.allreduce(tf.constant([1.0]), op=hvd.Sum),
             np.array([float(n)], np.float32))


def main():
    args = checklib.parse_args()
    # Sets are made before init (their ids come from init).
    n_expected = args.np
    sets = make_sets(n_expected)
    hvd.init(process_sets=list(sets))
    n, r = hvd.size(), hvd.rank()
    ck = checklib.Checker(r, n, args.result_dir, args.only)
    ck.section("static", check_static, ck, n, r, sets)
    ck.section("independent", check_independent, ck, n, r, sets)
    ck.section("errors", check_errors, ck, n, r, sets)
    ck.section("training", check_training, ck, n, r, sets)
    ck.section("reinit", check_reinit, ck, n, r, sets)
    if hvd.is_initialized():
        ck.section("dynamic", check_dynamic, ck, n, r)
    ck.section("comm", check_comm, ck, n, r, args.transport)
    code = ck.finish()
    hvd.shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())

"""Collective checks in TF1 graph mode (tf.compat.v1: graphs and Sessions).

A separate process from the TF2 worker because disable_eager_execution() is
process-wide. Same arguments and output as collectives_tf2.py.
"""

import os
import sys

import numpy as np
import tensorflow as tf

tf.compat.v1.disable_eager_execution()

import tf_hvd as hvd  # noqa: E402

import checklib  # noqa: E402
import collective_cases as cc  # noqa: E402
from checklib import shape_forms  # noqa: E402

v1 = tf.compat.v1


def check_all_cases(ck, n, r):
    """Every case of collective_cases built into one graph and run by one session.run."""
    graph = tf.Graph()
    with graph.as_default():
        cases = cc.all_cases(n, r)
        with v1.Session(graph=graph) as sess:
            cc.run_cases(ck, cases, "graph", session=sess)
            # Run the same fetches again: same op names, new step.
            cc.run_cases(ck, cases[:40], "graph", session=sess)


def check_session_communicates(ck, n, r):
    graph = tf.Graph()
    with graph.as_default():
        probe = hvd.allreduce(tf.constant([1.0]), op=hvd.Sum, name="folding_probe")
        with v1.Session(graph=graph) as sess:
            cc.check_communicates(ck, n, r, lambda: sess.run(probe), "Session.run")


def check_graph_specifics(ck, n, r):
    graph = tf.Graph()
    with graph.as_default():
        ck.equal("graph mode", tf.executing_eagerly(), False)
        # Op names follow the naming rule.
        x = tf.constant([1.0, 2.0], name="my_input")
        y = hvd.allreduce(x, op=hvd.Sum)
        ck.equal("default op name", y.op.name, "HorovodAllreduce_my_input_0")
        ck.equal("op type", y.op.type, "HorovodAllreduce")
        ck.equal("tensor_name attr empty", y.op.get_attr("tensor_name"), b"")
        z = hvd.allreduce(x, op=hvd.Sum, name="given_name")
        ck.equal("given op name", z.op.name, "given_name")
        with tf.name_scope("scope"):
            g = hvd.allgather(x)
        ck.equal("scoped op name", g.op.name, "scope/HorovodAllgather_my_input_0")

        # Placeholders fed with rank-dependent values, run several steps.
        ph = v1.placeholder(tf.float32, [None, 3])
        s = hvd.allreduce(ph, op=hvd.Sum, name="fed_sum")
        gath = hvd.allgather(ph, name="fed_gather")
        barrier = hvd.barrier()
        ck.expect(isinstance(barrier, tf.Operation), "barrier is an op in a graph",
                  "got %r" % (barrier,))

        # tf.compat.v1.gradients through allreduce and broadcast.
        w = tf.constant(np.arange(6, dtype=np.float32).reshape(2, 3) * (r + 1))
        xin = tf.constant(np.ones([2, 3], np.float32) * r)
        loss = tf.reduce_sum(hvd.allreduce(xin, op=hvd.Average) * w)
        (gr,) = tf.compat.v1.gradients(loss, [xin])
        loss_b = tf.reduce_sum(hvd.broadcast(xin, 0) * w)
        (gb,) = tf.compat.v1.gradients(loss_b, [xin])

        # TF1 variables and broadcast_global_variables.
        gv = v1.get_variable("gv_float", initializer=np.full([2, 3], r + 0.25, np.float32))
        gi = v1.get_variable("gv_int", initializer=np.arange(4, dtype=np.int64) * (r + 1))
        lv = v1.get_variable("lv_local", initializer=np.float32(r),
                             collections=[v1.GraphKeys.LOCAL_VARIABLES])
        bcast_all = hvd.broadcast_global_variables(n - 1)
        bcast_local = hvd.broadcast_variables([lv], 0)
        init = [v1.global_variables_initializer(), v1.local_variables_initializer()]
        # Rank 1 submits a different shape under the same name.
        bad = hvd.allreduce(tf.zeros([3, 3] if r == 1 else [2, 3]), op=hvd.Sum,
                            name="graph_bad")

        with v1.Session(graph=graph) as sess:
            for step in range(3):
                feed = np.full([r + 1, 3], r + step, np.float32)
                got_s, got_g = sess.run([s, gath], feed_dict={ph: np.full([2, 3], r + step,
                                                                            np.float32)})
                ck.close("fed allreduce step %d" % step, got_s,
                         np.full([2, 3], sum(q + step for q in range(n)), np.float32))
                got_g = sess.run(gath, feed_dict={ph: feed})
                ck.close("fed allgather step %d" % step, got_g, np.concatenate(
                    [np.full([q + 1, 3], q + step, np.float32) for q in range(n)]))
            sess.run(barrier)
            ck.passed()
            wsum = sum(np.arange(6, dtype=np.float32).reshape(2, 3) * (q + 1) for q in range(n))
            got_r, got_b = sess.run([gr, gb])
            ck.close("v1.gradients allreduce Average", got_r, wsum / n)
            # Horovod's broadcast gradient: the average of the incoming gradients.
            ck.close("v1.gradients broadcast", got_b,
                     wsum / n if r == 0 else np.zeros([2, 3], np.float32))
            sess.run(init)
            sess.run([bcast_all, bcast_local])
            ck.close("broadcast_global_variables float", sess.run(gv),
                     np.full([2, 3], n - 1 + 0.25, np.float32))
            ck.close("broadcast_global_variables int", sess.run(gi),
                     np.arange(4, dtype=np.int64) * n)
            ck.close("broadcast_variables local", sess.run(lv), np.float32(0))

            # Python objects in graph mode (work even though a graph is being built).
            graph.finalize()
            got = hvd.broadcast_object({"from": r} if r == n - 1 else None, root_rank=n - 1,
                                       session=sess)
            ck.equal("broadcast_object graph mode", got, {"from": n - 1})
            got = hvd.allgather_object(("r", r))
            ck.equal("allgather_object graph mode", got, [("r", q) for q in range(n)])

            # A mismatch error in a session, then the next run works.
            def mismatched():
                return sess.run(bad)
            ck.raises("shape mismatch in a session", mismatched, tf.errors.FailedPreconditionError,
                      ["graph_bad", shape_forms([2, 3]), shape_forms([3, 3])])
            ck.close("allreduce after the error", sess.run(s, feed_dict={
                ph: np.ones([2, 3], np.float32)}), np.full([2, 3], n, np.float32))


def main():
    args = checklib.parse_args()
    hvd.init()
    n, r = hvd.size(), hvd.rank()
    ck = checklib.Checker(r, n, args.result_dir, args.only)
    ck.equal("size", n, args.np)
    ck.equal("eager disabled", tf.executing_eagerly(), False)
    for item in args.expect_env:
        key, _, value = item.partition("=")
        ck.equal("environment %s" % key, os.environ.get(key), value)
    ck.section("session communicates", check_session_communicates, ck, n, r)
    ck.section("cases graph", check_all_cases, ck, n, r)
    ck.section("graph specifics", check_graph_specifics, ck, n, r)
    code = ck.finish()
    hvd.shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())

"""Training checks for TF1 graph mode: hvd.DistributedOptimizer around
tf.compat.v1.train optimizers, opt.minimize, MonitoredTrainingSession with
BroadcastGlobalVariablesHook. Run under the launcher.

    python -m tf_hvd.runner -np 2 python tests/parallel/training_workers/train_graph.py
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.compat.v1.disable_eager_execution()

import tf_hvd as hvd  # noqa: E402
from trainlib import Checks, initial_values, make_data, shard  # noqa: E402

v1 = tf.compat.v1
hvd.init()
N, R = hvd.size(), hvd.rank()
C = Checks(hvd)
B, DIM, HID = 4, 6, 8
SHAPES = [(DIM, HID), (HID,), (HID, 1), (1,)]

OPTS = {
    "sgd": lambda: v1.train.GradientDescentOptimizer(0.05),
    "adam": lambda: v1.train.AdamOptimizer(0.01),
    "momentum": lambda: v1.train.MomentumOptimizer(0.05, 0.9),
}
TOL = {"sgd": dict(rtol=1e-5, atol=1e-6), "momentum": dict(rtol=1e-5, atol=1e-6),
       "adam": dict(rtol=1e-4, atol=2e-5)}


def build_mlp(seed, extra_unused=False):
    """Placeholders, variables (initial values from ``seed``) and the loss."""
    x = v1.placeholder(tf.float32, [None, DIM], name="x")
    y = v1.placeholder(tf.float32, [None, 1], name="y")
    names = ["w0", "b0", "w1", "b1"]
    variables = [v1.get_variable(n, initializer=tf.constant(value))
                 for n, value in zip(names, initial_values(SHAPES, seed))]
    w0, b0, w1, b1 = variables
    pred = tf.matmul(tf.tanh(tf.matmul(x, w0) + b0), w1) + b1
    loss = tf.reduce_mean(tf.square(pred - y))
    if extra_unused:
        variables.append(v1.get_variable("unused", initializer=tf.ones([3])))
    return x, y, variables, loss


def reference_weights(name, x_all, y_all, batch, steps):
    """One process, plain optimizer, ``steps`` batches of ``batch`` samples."""
    with tf.Graph().as_default():
        x, y, variables, loss = build_mlp(0)
        train = OPTS[name]().minimize(loss)
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            for i in range(steps):
                sl = slice(i * batch, (i + 1) * batch)
                sess.run(train, {x: x_all[sl], y: y_all[sl]})
            return sess.run(variables)


def reference_gradients(x_all, y_all):
    with tf.Graph().as_default():
        x, y, variables, loss = build_mlp(0)
        grads = tf.gradients(loss, variables)
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            return sess.run(grads, {x: x_all, y: y_all})


def equivalence():
    passes = 8
    xg, yg = make_data(passes, N, B, DIM, seed=31)
    xs, ys = shard(xg, N, R, B), shard(yg, N, R, B)
    cases = [("sgd", 1, True), ("adam", 1, True), ("momentum", 1, True),
             ("sgd", 2, True), ("adam", 2, True), ("adam", 2, False)]
    for name, k, cf_v2 in cases:
        label = "tf1 %s bpps=%d%s" % (name, k, "" if cf_v2 else " control-flow-v1")
        if not cf_v2:
            v1.disable_control_flow_v2()
        try:
            with tf.Graph().as_default():
                x, y, variables, loss = build_mlp(0)
                step = v1.train.get_or_create_global_step()
                opt = hvd.DistributedOptimizer(OPTS[name](), backward_passes_per_step=k,
                                               average_aggregated_gradients=True)
                train = opt.minimize(loss, global_step=step)
                slots = [opt.get_slot(v, s) for v in variables for s in opt.get_slot_names()]
                hooks = [hvd.BroadcastGlobalVariablesHook(0)]
                with v1.train.MonitoredTrainingSession(hooks=hooks) as sess:
                    for i in range(passes):
                        sl = slice(i * B, (i + 1) * B)
                        sess.run(train, {x: xs[sl], y: ys[sl]})
                        C.same_on_all_ranks("%s after step %d" % (label, i),
                                            sess.run(variables + slots))
                    final, gstep = sess.run([variables, step])
        finally:
            if not cf_v2:
                v1.enable_control_flow_v2()
        C.expect(gstep == passes, label + " global step counts passes",
                 "global step %d" % gstep)
        ref = reference_weights(name, xg, yg, N * B * k, passes // k)
        C.close(label + " vs one process", final, ref, **TOL[name])


def broadcast_hook():
    with tf.Graph().as_default():
        x, y, variables, loss = build_mlp(seed=100 + R)
        opt = hvd.DistributedOptimizer(OPTS["adam"]())
        train = opt.minimize(loss)
        hooks = [hvd.BroadcastGlobalVariablesHook(0)]
        with v1.train.MonitoredTrainingSession(hooks=hooks) as sess:
            start = sess.run(variables)
            xg, yg = make_data(3, N, B, DIM, seed=32)
            for i in range(3):
                sl = slice(i * B, (i + 1) * B)
                sess.run(train, {x: shard(xg, N, R, B)[sl], y: shard(yg, N, R, B)[sl]})
                C.same_on_all_ranks("hook: different init, after step %d" % i,
                                    sess.run(variables))
    C.close("hook gives rank 0's initial values", start, initial_values(SHAPES, 100),
            rtol=0, atol=0)
    # broadcast_global_variables without a hook.
    with tf.Graph().as_default():
        x, y, variables, loss = build_mlp(seed=200 + R)
        bcast = hvd.broadcast_global_variables(0)
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            sess.run(bcast)
            C.close("broadcast_global_variables", sess.run(variables),
                    initial_values(SHAPES, 200), rtol=0, atol=0)


def gradient_features():
    xg, yg = make_data(1, N, B, DIM, seed=33)
    xs, ys = shard(xg, N, R, B), shard(yg, N, R, B)
    ref = reference_gradients(xg, yg)
    cases = [
        ("default", {}, dict(rtol=1e-5, atol=1e-6)),
        ("fp16", dict(compression=hvd.Compression.fp16), dict(rtol=3e-3, atol=2e-3)),
        ("groups=2", dict(groups=2), dict(rtol=1e-5, atol=1e-6)),
        ("predivide=4", dict(gradient_predivide_factor=4.0), dict(rtol=1e-5, atol=1e-6)),
        ("op=Sum", dict(op=hvd.Sum), None),
    ]
    for label, kwargs, tol in cases:
        with tf.Graph().as_default():
            x, y, variables, loss = build_mlp(0, extra_unused=True)
            opt = hvd.DistributedOptimizer(OPTS["sgd"](), **kwargs)
            gv = opt.compute_gradients(loss, var_list=variables)
            C.expect(gv[-1][0] is None, "tf1 %s None gradient stays None" % label)
            with v1.Session() as sess:
                sess.run(v1.global_variables_initializer())
                grads = sess.run([g for g, _ in gv[:-1]], {x: xs, y: ys})
        expected = ref if tol is not None else [N * g for g in ref]
        C.close("tf1 compute_gradients %s" % label, grads, expected,
                **(tol or dict(rtol=1e-5, atol=1e-6)))
        C.same_on_all_ranks("tf1 compute_gradients %s same on ranks" % label, grads)
    with tf.Graph().as_default():
        x, y, variables, loss = build_mlp(0)
        groups = [[variables[0], variables[2]]]
        opt = hvd.DistributedOptimizer(OPTS["sgd"](), groups=groups)
        gv = opt.compute_gradients(loss, var_list=variables)
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            grads = sess.run([g for g, _ in gv], {x: xs, y: ys})
    C.close("tf1 compute_gradients groups=[[w0, w1]]", grads, ref)
    # register_local_var: that variable's gradient is this rank's own, divided by
    # size() unless scale_local_gradients=False (Horovod's default is True).
    for scale in (True, False):
        with tf.Graph().as_default():
            x, y, variables, loss = build_mlp(0)
            opt = hvd.DistributedOptimizer(OPTS["sgd"](), scale_local_gradients=scale)
            opt.register_local_var(variables[-1])
            gv = opt.compute_gradients(loss, var_list=variables)
            own = tf.gradients(loss, variables[-1])[0]
            with v1.Session() as sess:
                sess.run(v1.global_variables_initializer())
                grads, own = sess.run([[g for g, _ in gv], own], {x: xs, y: ys})
        C.close("tf1 register_local_var shared (scale=%s)" % scale, grads[:-1], ref[:-1],
                rtol=1e-5, atol=1e-6)
        C.close("tf1 register_local_var local (scale=%s)" % scale, [grads[-1]],
                [own / (N if scale else 1)], rtol=1e-6, atol=1e-7)


VOCAB, SEQ, EMB = 20, 3, 4


def sparse():
    passes = 6
    rs = np.random.RandomState(34)
    ids = rs.randint(0, VOCAB, size=(passes * N * B, SEQ)).astype(np.int32)
    yg = rs.randn(passes * N * B, 1).astype(np.float32)
    init = initial_values([(VOCAB, EMB), (SEQ * EMB, 1)], 5)

    def build():
        idx = v1.placeholder(tf.int32, [None, SEQ])
        y = v1.placeholder(tf.float32, [None, 1])
        emb = v1.get_variable("emb", initializer=tf.constant(init[0]))
        w = v1.get_variable("w", initializer=tf.constant(init[1]))
        feats = tf.reshape(tf.gather(emb, idx), [-1, SEQ * EMB])
        loss = tf.reduce_mean(tf.square(tf.matmul(feats, w) - y))
        return idx, y, [emb, w], loss

    with tf.Graph().as_default():
        idx, y, variables, loss = build()
        train = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            for i in range(passes):
                sl = slice(i * N * B, (i + 1) * N * B)
                sess.run(train, {idx: ids[sl], y: yg[sl]})
            ref = sess.run(variables)
    for sparse_as_dense in (False, True):
        label = "tf1 embedding sparse_as_dense=%s" % sparse_as_dense
        with tf.Graph().as_default():
            idx, y, variables, loss = build()
            opt = hvd.DistributedOptimizer(v1.train.GradientDescentOptimizer(0.1),
                                           sparse_as_dense=sparse_as_dense)
            gv = opt.compute_gradients(loss, var_list=variables)
            C.expect(isinstance(gv[0][0], tf.IndexedSlices) != sparse_as_dense,
                     label + " gradient type", "got %s" % type(gv[0][0]))
            train = opt.apply_gradients(gv)
            with v1.train.MonitoredTrainingSession(
                    hooks=[hvd.BroadcastGlobalVariablesHook(0)]) as sess:
                xs, ys = shard(ids, N, R, B), shard(yg, N, R, B)
                for i in range(passes):
                    sl = slice(i * B, (i + 1) * B)
                    sess.run(train, {idx: xs[sl], y: ys[sl]})
                    C.same_on_all_ranks("%s after step %d" % (label, i),
                                        sess.run(variables))
                final = sess.run(variables)
        C.close(label + " vs one process", final, ref)


C.section("tf1_equivalence", equivalence)
C.section("tf1_broadcast_hook", broadcast_hook)
C.section("tf1_gradient_features", gradient_features)
C.section("tf1_sparse", sparse)
sys.exit(C.finish())

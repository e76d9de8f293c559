"""tf_hvd collectives inside XLA-compiled functions (run under the launcher, see
collective_launch.py). Sections:
* ops: tf.function(jit_compile=True) allreduce (Sum/Average/Min/Max, float32, float64,
  int32, float16, scalar and 2-D, prescale/postscale), grouped allreduce (mixed dtypes),
  allgather, broadcast (two roots): exact on every rank, equal to the same function
  without XLA, stable over repeated calls, and really compiled to the custom call
  (the HLO names it);
* errors: allgather with a first dimension that differs between ranks fails naming
  the tensor; ops without an XLA kernel stop naming the op;
* keras: model.fit with hvd.DistributedOptimizer and model.compile(jit_compile=True)
  ends with the weights of jit_compile=False, the same on every rank;
* tape: a DistributedGradientTape training loop in tf.function(jit_compile=True)
  equals the same loop without XLA.
"""

import sys

import numpy as np
import tensorflow as tf

import tf_hvd as hvd

import checklib


def value(r, shape, dtype, salt=0):
    size = int(np.prod(shape)) if shape else 1
    base = (np.arange(size) % 7).reshape(shape) if shape else np.array(1)
    return (base + 3 * r + salt).astype(dtype)


def compiled_and_plain(fn):
    """The same Python function as an XLA-compiled and a plain tf.function."""
    return tf.function(fn, jit_compile=True), tf.function(fn)


def check_ops(ck, n, r):
    ranks = range(n)
    # Allreduce: several dtypes, shapes and reduce ops; Average of int32 is
    # compared with the plain kernel (the same core computes both).
    cases = [(np.float32, [3, 4], hvd.Sum), (np.float64, [5], hvd.Sum),
             (np.int32, [2, 3], hvd.Sum), (np.float32, [], hvd.Average),
             (np.float64, [4], hvd.Average), (np.int32, [6], hvd.Average),
             (np.float16, [8], hvd.Sum), (np.float32, [7], hvd.Max),
             (np.int32, [3], hvd.Min)]
    for k, (dtype, shape, op) in enumerate(cases):
        def reduce_fn(x, op=op, k=k):
            return hvd.allreduce(x, op=op, name="xla_ar_%d" % k)
        xla_fn, plain_fn = compiled_and_plain(reduce_fn)
        x = tf.constant(value(r, shape, dtype))
        label = "allreduce %s %s %s" % (np.dtype(dtype).name, shape, op)
        got = xla_fn(x)
        per_rank = [value(q, shape, dtype) for q in ranks]
        if op == hvd.Sum:
            ck.close(label, got, np.sum(per_rank, axis=0).astype(dtype), rtol=0, atol=0)
        elif op == hvd.Max:
            ck.close(label, got, np.max(per_rank, axis=0).astype(dtype), rtol=0, atol=0)
        elif op == hvd.Min:
            ck.close(label, got, np.min(per_rank, axis=0).astype(dtype), rtol=0, atol=0)
        ck.close(label + " = plain", got, plain_fn(x).numpy(), rtol=0, atol=0)
        ck.close(label + " again", xla_fn(x), got.numpy(), rtol=0, atol=0)

    def scaled(x):
        return hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0,
                             name="xla_scaled")
    xla_fn, plain_fn = compiled_and_plain(scaled)
    x = tf.constant(value(r, [6], np.float32))
    expected = (np.sum([value(q, [6], np.float32) * 0.5 for q in ranks], axis=0) * 3.0)
    ck.close("allreduce prescale/postscale", xla_fn(x), expected.astype(np.float32),
             rtol=0, atol=0)
    ck.close("allreduce prescale/postscale = plain", xla_fn(x), plain_fn(x).numpy(),
             rtol=0, atol=0)
    hlo = xla_fn.experimental_get_compiler_ir(x)(stage="hlo")
    ck.expect("tfhvd_collective" in hlo and "prescale = 5.000000000e-01" in hlo,
              "compiled to the Horovod custom call", hlo[-2000:])

    def grouped(a, b, c):
        return hvd.grouped_allreduce([a, b, c], op=hvd.Average, name="xla_group")
    xla_fn, plain_fn = compiled_and_plain(grouped)
    args = [tf.constant(value(r, [3, 4], np.float32)), tf.constant(value(r, [5], np.float64)),
            tf.constant(value(r, [], np.float32, salt=2))]
    got = xla_fn(*args)
    exp = [np.mean([value(q, s, d, salt) for q in ranks], axis=0).astype(d)
           for s, d, salt in (([3, 4], np.float32, 0), ([5], np.float64, 0),
                              ([], np.float32, 2))]
    ck.close("grouped allreduce", [t.numpy() for t in got], exp, rtol=0, atol=0)
    ck.close("grouped allreduce = plain", [t.numpy() for t in xla_fn(*args)],
             [t.numpy() for t in plain_fn(*args)], rtol=0, atol=0)

    for dtype in (np.float32, np.int32, np.float64):
        def gather(x):
            return hvd.allgather(x, name="xla_gather_%s" % np.dtype(dtype).name)
        xla_fn, plain_fn = compiled_and_plain(gather)
        x = tf.constant(value(r, [2, 3], dtype))
        exp = np.concatenate([value(q, [2, 3], dtype) for q in ranks])
        ck.close("allgather %s" % np.dtype(dtype).name, xla_fn(x), exp, rtol=0, atol=0)
        ck.close("allgather %s = plain" % np.dtype(dtype).name, xla_fn(x),
                 plain_fn(x).numpy(), rtol=0, atol=0)

    for root in (0, n - 1):
        for dtype in (np.float32, np.int32, np.bool_):
            def bcast(x, root=root):
                return hvd.broadcast(x, root_rank=root,
                                     name="xla_bcast_%d_%s" % (root, np.dtype(dtype).name))
            xla_fn, _ = compiled_and_plain(bcast)
            x = tf.constant(value(r, [4], dtype) if dtype != np.bool_
                            else np.array([r % 2 == 0, True, r == 1]))
            exp = (value(root, [4], dtype) if dtype != np.bool_
                   else np.array([root % 2 == 0, True, root == 1]))
            ck.close("broadcast root %d %s" % (root, np.dtype(dtype).name), xla_fn(x), exp,
                     rtol=0, atol=0)

    # Unnamed collectives negotiate under their node names (the same on every rank).
    @tf.function(jit_compile=True)
    def unnamed(x, y):
        return hvd.allreduce(x, op=hvd.Sum), hvd.allgather(y)
    a, b = unnamed(tf.constant([float(r)]), tf.constant([[r]]))
    ck.close("unnamed allreduce", a, np.array([float(sum(ranks))], np.float32), rtol=0, atol=0)
    ck.close("unnamed allgather", b, np.array([[q] for q in ranks], np.int32), rtol=0, atol=0)


def check_errors(ck, n, r):
    @tf.function(jit_compile=True)
    def ragged(x):
        return hvd.allgather(x, name="xla_ragged")
    ck.raises("allgather with unequal first dimensions", lambda: ragged(tf.ones([r + 1, 2])),
              tf.errors.OpError, ["xla_ragged", "same first dimension"])
    # The job goes on: a later compiled collective works.
    @tf.function(jit_compile=True)
    def after(x):
        return hvd.allreduce(x, op=hvd.Sum, name="xla_after_error")
    ck.close("allreduce after the error", after(tf.constant([1.0])),
             np.array([float(n)], np.float32), rtol=0, atol=0)

    for label, call in (("alltoall", lambda x: hvd.alltoall(x)),
                        ("reducescatter", lambda x: hvd.reducescatter(x)),
                        ("join", lambda x: hvd.join())):
        fn = tf.function(call, jit_compile=True)
        ck.raises("%s inside XLA" % label, lambda: fn(tf.ones([n, 2])), NotImplementedError,
                  ["has no XLA kernel", "Horovod"])


def make_model(keras, seed):
    model = keras.Sequential([keras.Input((8,)),
                              keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(4)])
    rng = np.random.RandomState(seed)
    model.set_weights([rng.uniform(-0.5, 0.5, w.shape).astype(np.float32)
                       for w in model.get_weights()])
    return model


def check_keras(ck, n, r):
    import keras
    import tf_hvd.keras as hvd_keras
    rng = np.random.RandomState(100 + r)
    x = rng.normal(size=(64, 8)).astype(np.float32)
    y = rng.normal(size=(64, 4)).astype(np.float32)
    weights = {}
    for jit in (True, False):
        model = make_model(keras, seed=7)
        opt = hvd_keras.DistributedOptimizer(keras.optimizers.Adam(0.01))
        model.compile(optimizer=opt, loss="mse", jit_compile=jit)
        ck.equal("keras kept jit_compile=%s" % jit, bool(model.jit_compile), jit)
        model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
        weights[jit] = [w.copy() for w in model.get_weights()]
    for i, (a, b) in enumerate(zip(weights[True], weights[False])):
        ck.close("keras jit_compile=True = False, weight %d" % i, a, b, rtol=1e-5, atol=1e-6)
        # Identical on every rank: rank 0's broadcast (outside XLA) equals ours.
        ck.close("keras XLA weight %d same on every rank" % i,
                 hvd.broadcast(tf.constant(a), root_rank=0, name="keras_w_%d" % i), a,
                 rtol=0, atol=0)
    moved = max(float(np.abs(a - b).max()) for a, b in zip(
        weights[True], make_model(keras, seed=7).get_weights()))
    ck.expect(moved > 1e-3, "keras training moved the weights", "max change %g" % moved)


def check_tape(ck, n, r):
    rng = np.random.RandomState(200 + r)
    x = tf.constant(rng.normal(size=(32, 5)).astype(np.float32))
    y = tf.constant(rng.normal(size=(32, 1)).astype(np.float32))
    results = {}
    for jit in (True, False):
        w = tf.Variable(np.linspace(-1, 1, 5).reshape(5, 1).astype(np.float32))
        b = tf.Variable([0.1])

        def step():
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((tf.matmul(x, w) + b - y) ** 2)
            tape = hvd.DistributedGradientTape(tape)
            gw, gb = tape.gradient(loss, [w, b])
            w.assign_sub(0.1 * gw)
            b.assign_sub(0.1 * gb)
            return loss
        fn = tf.function(step, jit_compile=jit)
        for _ in range(5):
            fn()
        results[jit] = (w.numpy(), b.numpy())
    ck.close("tape loop XLA = plain", list(results[True]), list(results[False]),
             rtol=1e-5, atol=1e-6)
    ck.close("tape loop same on every rank",
             hvd.broadcast(tf.constant(results[True][0]), root_rank=0, name="tape_w"),
             results[True][0], rtol=0, atol=0)


def main():
    args = checklib.parse_args()
    hvd.init()
    n, r = hvd.size(), hvd.rank()
    ck = checklib.Checker(r, n, args.result_dir, args.only)
    ck.section("ops", check_ops, ck, n, r)
    ck.section("errors", check_errors, ck, n, r)
    ck.section("keras", check_keras, ck, n, r)
    ck.section("tape", check_tape, ck, n, r)
    code = ck.finish()
    hvd.shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())

"""Horovod-parity checks of tf_hvd.keras, in a process started with
TF_USE_LEGACY_KERAS=1 (so ``tf.keras`` is tf-keras 2, as in Horovod users'
Keras 2 scripts), using Keras 3 directly as well.

Sections (all ranks run all of them, in order):
  tf_keras_fit        model.fit with DistributedOptimizer over tf-keras' new and
                      legacy optimizers == one process on the global batch;
                      broadcast callback, metric average, compile flag
  tf_keras_tape       tape loops: DistributedGradientTape + plain optimizer +
                      broadcast_variables(opt.variables()); minimize(tape=) of
                      the wrapper; tf_hvd.DistributedOptimizer takes tf-keras
  tf_keras_bpps       backward_passes_per_step=2 in fit == one process
  tf_keras_load       rank 0 saves (.h5, legacy optimizer), all load with
                      load_model(legacy_opts=True) and train on identically
  local_vars          PartialDistributedOptimizer / register_local_var with
                      scale_local_gradients True and False (tf-keras, Keras 3);
                      BroadcastGlobalVariablesCallback(local_variables=)
  sync_bn             SyncBatchNormalization (Keras 3 and tf-keras) == a
                      BatchNormalization over the global batch, uneven batches
  keras3_cross        a Keras 3 model.fit with the callbacks (tf-keras based here)

Usage: train_keras_parity.py <shared tmp dir>
"""

import os
import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from trainlib import Checks, initial_values, make_data, shard  # noqa: E402

import tf_hvd  # noqa: E402
import tf_hvd.keras as hvd  # noqa: E402

import keras  # noqa: E402  (Keras 3)
import tf_keras  # noqa: E402

hvd.init()
C = Checks(hvd)
SIZE, RANK = hvd.size(), hvd.rank()
TMP = sys.argv[1]
B = 4          # per-rank batch
DIM = 5


def tk_model(K, seed):
    model = K.Sequential([K.Input((DIM,)), K.layers.Dense(7, activation="tanh"),
                          K.layers.Dense(1)])
    shapes = [tuple(w.shape) for w in model.get_weights()]
    model.set_weights(initial_values(shapes, seed))
    return model


def weights(model):
    return [np.asarray(w) for w in model.get_weights()]


def opt_values(opt):
    from tf_hvd._keras.flavors import optimizer_variables
    return [np.asarray(tf.convert_to_tensor(v)) for v in optimizer_variables(opt)]


def global_data(passes=3):
    x, y = make_data(passes, SIZE, B, DIM)
    return x, y, shard(x, SIZE, RANK, B), shard(y, SIZE, RANK, B)


# ---------------------------------------------------------------------------
def tf_keras_fit():
    C.expect(tf.keras.optimizers.Adam is tf_keras.optimizers.Adam, "tf.keras is tf_keras")
    x, y, xs, ys = global_data()
    makers = {
        "adam": lambda: tf.keras.optimizers.Adam(0.01),
        "legacy_sgd": lambda: tf.keras.optimizers.legacy.SGD(0.05, momentum=0.9),
    }
    for label, make in makers.items():
        ref = tk_model(tf.keras, 7)
        ref.compile(optimizer=make(), loss="mse")
        ref.fit(x, y, batch_size=SIZE * B, shuffle=False, epochs=1, verbose=0)

        model = tk_model(tf.keras, 7)
        opt = hvd.DistributedOptimizer(make())
        C.expect(isinstance(opt, type(make())) and hvd.is_distributed_optimizer(opt),
                 label + " wrapper class")
        model.compile(optimizer=opt, loss="mse", metrics=["mae"],
                      experimental_run_tf_function=False)
        hist = model.fit(xs, ys, batch_size=B, shuffle=False, epochs=1, verbose=0,
                         callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                                    hvd.callbacks.MetricAverageCallback()])
        C.close(label + " fit == one process", weights(model), weights(ref), rtol=2e-5)
        C.same_on_all_ranks(label + " optimizer state", opt_values(opt))
        C.expect(len(opt.variables()) == len(opt_values(opt)) > 1,
                 label + " opt.variables()")
        losses = hvd.allgather_object(hist.history["loss"][-1])
        C.expect(len(set(losses)) == 1, label + " metric averaged", str(losses))

    # Ranks that start apart end equal: the callback broadcasts after batch 1.
    model = tk_model(tf.keras, 100 + RANK)
    opt = hvd.DistributedOptimizer(tf.keras.optimizers.legacy.Adam(0.01))
    model.compile(optimizer=opt, loss="mse")
    model.fit(xs, ys, batch_size=B, epochs=1, verbose=0,
              callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
    C.same_on_all_ranks("broadcast callback: weights", weights(model))
    C.same_on_all_ranks("broadcast callback: optimizer", opt_values(opt))


def tf_keras_tape():
    x, y, xs, ys = global_data()
    loss_fn = tf.keras.losses.MeanSquaredError()
    # Horovod's tensorflow2_mnist pattern, ranks starting apart.
    model = tk_model(tf.keras, 200 + RANK)
    opt = tf.keras.optimizers.legacy.Adam(0.01)

    @tf.function
    def step(xb, yb, first):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        tape = tf_hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        if first:
            tf_hvd.broadcast_variables(model.variables, root_rank=0)
            tf_hvd.broadcast_variables(opt.variables(), root_rank=0)
        return loss

    for i in range(0, len(xs), B):
        step(xs[i:i + B], ys[i:i + B], i == 0)
    C.same_on_all_ranks("tape + broadcast(opt.variables()): weights", weights(model))
    C.same_on_all_ranks("tape + broadcast(opt.variables()): optimizer", opt_values(opt))

    # The wrapper's minimize(tape=) reduces, as Horovod's does; tf_hvd's
    # top-level DistributedOptimizer takes tf-keras optimizers too.
    for label, wrap, make in (
            ("keras.DistributedOptimizer", hvd.DistributedOptimizer,
             lambda: tf.keras.optimizers.SGD(0.05, momentum=0.5)),
            ("tf_hvd.DistributedOptimizer", tf_hvd.DistributedOptimizer,
             lambda: tf.keras.optimizers.legacy.SGD(0.05, momentum=0.5))):
        if True:
            ref, model = tk_model(tf.keras, 9), tk_model(tf.keras, 9)
            ref_opt, opt = make(), wrap(make())
            for i in range(0, len(xs) // B):
                gx, gy = x[i * SIZE * B:(i + 1) * SIZE * B], y[i * SIZE * B:(i + 1) * SIZE * B]
                with tf.GradientTape() as tape:
                    loss = loss_fn(gy, ref(gx, training=True))
                ref_opt.minimize(loss, ref.trainable_variables, tape=tape)
                with tf.GradientTape() as tape:
                    loss = loss_fn(ys[i * B:(i + 1) * B], model(xs[i * B:(i + 1) * B],
                                                                training=True))
                opt.minimize(loss, model.trainable_variables, tape=tape)
            C.close("%s minimize(tape=) %s == one process" % (label, type(opt).__module__),
                    weights(model), weights(ref), rtol=2e-5)


def tf_keras_bpps():
    x, y, xs, ys = global_data(passes=4)
    ref = tk_model(tf.keras, 11)
    ref.compile(optimizer=tf.keras.optimizers.SGD(0.05), loss="mse")
    ref.fit(x, y, batch_size=2 * SIZE * B, shuffle=False, epochs=1, verbose=0)
    for make in (lambda: tf.keras.optimizers.SGD(0.05),
                 lambda: tf.keras.optimizers.legacy.SGD(0.05)):
        model = tk_model(tf.keras, 11)
        opt = hvd.DistributedOptimizer(make(), backward_passes_per_step=2,
                                       average_aggregated_gradients=True)
        model.compile(optimizer=opt, loss="mse")
        model.fit(xs, ys, batch_size=B, shuffle=False, epochs=1, verbose=0)
        C.close("bpps=2 fit == one process (%s)" % type(opt).__module__,
                weights(model), weights(ref), rtol=2e-5)
        C.expect(int(opt.iterations.numpy()) == 2, "bpps=2 iterations count updates",
                 str(int(opt.iterations.numpy())))


def tf_keras_load():
    x, y, xs, ys = global_data()
    path = os.path.join(TMP, "legacy.h5")
    model = tk_model(tf.keras, 13)
    model.compile(optimizer=hvd.DistributedOptimizer(
        tf.keras.optimizers.legacy.Adam(0.01)), loss="mse")
    model.fit(xs, ys, batch_size=B, shuffle=False, epochs=1, verbose=0)
    if RANK == 0:
        model.save(path)
    tf_hvd.barrier()
    loaded = hvd.load_model(path, legacy_opts=True, compression=hvd.Compression.fp16)
    opt = loaded.optimizer
    C.expect(hvd.is_distributed_optimizer(opt) and type(opt).__name__ == "Adam",
             "load_model(legacy_opts=True) wraps", repr(type(opt)))
    C.expect(opt._hvd.params.compression is hvd.Compression.fp16, "load_model compression")
    C.close("loaded state", opt_values(opt), opt_values(model.optimizer))
    loaded.fit(xs, ys, batch_size=B, shuffle=False, epochs=1, verbose=0)
    model.fit(xs, ys, batch_size=B, shuffle=False, epochs=1, verbose=0)
    C.close("loaded model trains on as the original", weights(loaded), weights(model),
            rtol=1e-2, atol=1e-3)   # fp16 compression vs none
    C.same_on_all_ranks("loaded model on all ranks", weights(loaded))
    # A new-optimizer (.keras) model loads without legacy_opts.
    path = os.path.join(TMP, "new.keras")
    model = tk_model(tf.keras, 14)
    model.compile(optimizer=hvd.DistributedOptimizer(tf.keras.optimizers.Adam(0.01)),
                  loss="mse")
    model.fit(xs, ys, batch_size=B, shuffle=False, epochs=1, verbose=0)
    if RANK == 0:
        model.save(path)
    tf_hvd.barrier()
    loaded = hvd.load_model(path)
    C.expect(hvd.is_distributed_optimizer(loaded.optimizer), "load_model (.keras, tf-keras)")
    C.close("loaded .keras state", opt_values(loaded.optimizer), opt_values(model.optimizer))


def _local_step(K, make, wrap, scale):
    """One step from equal weights on rank-specific data; returns
    (weights after, plain local gradients)."""
    rs = np.random.RandomState(50 + RANK)
    xb = rs.randn(B, DIM).astype(np.float32)
    yb = rs.randn(B, 1).astype(np.float32)
    model = tk_model(K, 21)
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(xb, training=True) - yb))
    grads = [np.asarray(g) for g in tape.gradient(loss, model.trainable_variables)]
    before = weights(model)
    opt = wrap(make(), model, scale)
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(xb, training=True) - yb))
    if K is not keras:
        # tf-keras reduces where Horovod does: in minimize's compute step.
        opt.minimize(loss, model.trainable_variables, tape=tape)
    else:
        g = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(g, model.trainable_variables))
    return before, weights(model), grads


def local_vars():
    lr = 0.1
    partial = (lambda o, m, s: hvd.PartialDistributedOptimizer(
        o, local_layers=m.layers[-1], scale_local_gradients=s))

    def registered(o, m, s):
        opt = hvd.DistributedOptimizer(o, scale_local_gradients=s)
        for v in m.layers[-1].trainable_weights:
            opt.register_local_var(v)
        return opt

    cases = [
        ("tf-keras partial", tf.keras, lambda: tf.keras.optimizers.SGD(lr), partial),
        ("tf-keras legacy register", tf.keras, lambda: tf.keras.optimizers.legacy.SGD(lr),
         registered),
        ("keras3 partial", keras, lambda: keras.optimizers.SGD(lr), partial),
    ]
    for label, K, make, wrap in cases:
        for scale in (True, False):
            before, after, grads = _local_step(K, make, wrap, scale)
            mean = [np.mean(hvd.allgather_object(g), axis=0) for g in grads]
            div = SIZE if scale else 1
            expected = [before[0] - lr * mean[0], before[1] - lr * mean[1],
                        before[2] - lr * grads[2] / div, before[3] - lr * grads[3] / div]
            C.close("%s scale=%s: shared averaged, local kept" % (label, scale),
                    after, expected, rtol=1e-5, atol=1e-6)
            C.same_on_all_ranks(label + " shared weights equal", after[:2])
            C.differ_across_ranks(label + " local weights per rank", after[2:])
    with_bad = None
    try:
        hvd.PartialDistributedOptimizer(keras.optimizers.SGD(0.1), local_layers=[object()])
    except ValueError as e:
        with_bad = str(e)
    C.expect(with_bad is not None and "layers" in with_bad, "bad local layer rejected",
             str(with_bad))

    # The broadcast callback leaves local variables alone.
    x, y, xs, ys = global_data()
    model = tk_model(tf.keras, 300 + RANK)
    local = model.layers[-1].kernel
    opt = hvd.DistributedOptimizer(tf.keras.optimizers.legacy.SGD(0.01))
    opt.register_local_var(local)
    model.compile(optimizer=opt, loss="mse")
    model.fit(xs, ys, batch_size=B, epochs=1, verbose=0, callbacks=[
        hvd.callbacks.BroadcastGlobalVariablesCallback(0, local_variables=[local])])
    w = weights(model)
    C.same_on_all_ranks("local_variables=: others broadcast", w[:2] + w[3:])
    C.differ_across_ranks("local_variables=: local kept", [w[2]])


def _bn_case(label, K, layer_cls, mask_ok):
    counts = [4 + 2 * r for r in range(SIZE)]          # uneven batches
    rs = np.random.RandomState(5)
    xg = (rs.randn(sum(counts), 3) * 2 + 1).astype(np.float32)
    start = sum(counts[:RANK])
    xl = xg[start:start + counts[RANK]]
    proj = rs.randn(3).astype(np.float32)
    gamma0 = np.array([1.5, 0.5, 2.0], np.float32)

    def run(layer, x):
        layer.build((None, 3))
        layer.gamma.assign(gamma0)
        xt = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(xt)
            out = layer(xt, training=True)
            loss = tf.reduce_sum(out * proj)
        dx, dg, db = tape.gradient(loss, [xt, layer.gamma, layer.beta])
        return (np.asarray(out), np.asarray(dx), np.asarray(dg), np.asarray(db),
                np.asarray(layer.moving_mean), np.asarray(layer.moving_variance))

    ref = run(K.layers.BatchNormalization(momentum=0.5), xg)
    got = run(layer_cls(momentum=0.5), xl)
    sl = slice(start, start + counts[RANK])
    C.close(label + " output == global BN", [got[0]], [ref[0][sl]], rtol=1e-4, atol=1e-5)
    C.close(label + " input grad == global BN", [got[1]], [ref[1][sl]], rtol=1e-4, atol=1e-5)
    dg = np.sum(hvd.allgather_object(got[2]), axis=0)
    db = np.sum(hvd.allgather_object(got[3]), axis=0)
    C.close(label + " gamma/beta grads sum to global BN's", [dg, db], [ref[2], ref[3]],
            rtol=1e-4, atol=1e-5)
    C.close(label + " moving stats == global BN", got[4:], ref[4:], rtol=1e-5)


def sync_bn():
    from tf_hvd.sync_batch_norm import sync_batch_norm_class
    _bn_case("keras3", keras, sync_batch_norm_class(keras), True)
    C.expect(hvd.SyncBatchNormalization is tf_hvd.SyncBatchNormalization
             and issubclass(hvd.SyncBatchNormalization, tf_keras.layers.BatchNormalization),
             "SyncBatchNormalization follows tf.keras")
    _bn_case("tf-keras", tf.keras, hvd.SyncBatchNormalization, True)
    try:
        hvd.SyncBatchNormalization(fused=True)
        C.expect(False, "fused=True rejected")
    except ValueError as e:
        C.expect("fused" in str(e), "fused=True rejected", str(e))


def keras3_cross():
    x, y, xs, ys = global_data()
    model = tk_model(keras, 400 + RANK)
    opt = hvd.DistributedOptimizer(keras.optimizers.Adam(0.01))
    model.compile(optimizer=opt, loss="mse")
    model.fit(xs, ys, batch_size=B, epochs=1, verbose=0, callbacks=[
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd.callbacks.MetricAverageCallback()])
    C.same_on_all_ranks("Keras 3 fit with tf-keras callbacks: weights", weights(model))
    C.same_on_all_ranks("Keras 3 fit with tf-keras callbacks: optimizer",
                        opt_values(opt))


for name in ("tf_keras_fit", "tf_keras_tape", "tf_keras_bpps", "tf_keras_load",
             "local_vars", "sync_bn", "keras3_cross"):
    C.section(name, globals()[name])
rc = C.finish()
sys.stdout.flush()
os._exit(rc)

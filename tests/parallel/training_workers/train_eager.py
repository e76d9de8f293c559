"""Training checks for Keras 3 (model.fit, custom train_step) and TF2 custom
loops (DistributedGradientTape in tf.function and eagerly). Run under the
launcher; every rank runs every section.

    python -m tf_hvd.runner -np 2 python tests/parallel/training_workers/train_eager.py [TMPDIR]
"""

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tf_hvd as hvd  # noqa: E402
import tf_hvd.keras as hk  # noqa: E402
from trainlib import Checks, initial_values, make_data, shard  # noqa: E402

hvd.init()
N, R = hvd.size(), hvd.rank()
C = Checks(hvd)
TMP = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="train_eager_")
B, DIM, HID = 4, 6, 8

OPTS = {
    "sgd": lambda: keras.optimizers.SGD(0.05),
    "adam": lambda: keras.optimizers.Adam(0.01),
}
TOL = {"sgd": dict(rtol=1e-5, atol=1e-6), "adam": dict(rtol=1e-4, atol=2e-5)}


def to_np(values):
    return [keras.ops.convert_to_numpy(v) for v in values]


def mlp(seed=0):
    model = keras.Sequential([keras.Input((DIM,)),
                              keras.layers.Dense(HID, activation="tanh"),
                              keras.layers.Dense(1)])
    set_init(model, seed)
    return model


def set_init(model, seed):
    shapes = [tuple(v.shape) for v in model.weights]
    for v, value in zip(model.weights, initial_values(shapes, seed)):
        v.assign(value)


def state(model):
    values = to_np(model.weights)
    if model.optimizer is not None and model.optimizer.built:
        values += to_np(model.optimizer.variables)
    return values


class SameEveryStep(keras.callbacks.Callback):
    """After every batch: weights and optimizer state identical on all ranks."""

    def __init__(self, label):
        super().__init__()
        self.label = label
        self.step = 0

    def on_train_batch_end(self, batch, logs=None):
        C.same_on_all_ranks("%s after step %d" % (self.label, self.step),
                            state(self.model))
        self.step += 1


def on_root(fn):
    """``fn()`` computed on rank 0 only and shared with everyone.

    Used for the one-process references: only rank 0 builds those models, so
    Keras' auto-numbered layer/model names differ between ranks afterwards,
    which the training collectives must not depend on.
    """
    return hvd.broadcast_object(fn() if R == 0 else None, root_rank=0)


def mse(model, x, y):
    return tf.reduce_mean(tf.square(model(x, training=True) - y))


# ---------------------------------------------------------------------------
# Keras: model.fit and a custom train_step


class CustomStepModel(keras.Model):
    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(self(x, training=True) - y))
        grads = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply(grads, self.trainable_variables)
        return {"loss": loss}


def custom_step_mlp(seed=0):
    inputs = keras.Input((DIM,))
    hidden = keras.layers.Dense(HID, activation="tanh")(inputs)
    model = CustomStepModel(inputs, keras.layers.Dense(1)(hidden))
    set_init(model, seed)
    return model


def keras_equivalence():
    passes = 8
    x, y = make_data(passes, N, B, DIM)
    for name in ("sgd", "adam"):
        for k in (1, 2):
            label = "keras fit %s bpps=%d" % (name, k)
            model = mlp()
            opt = hk.DistributedOptimizer(OPTS[name](), backward_passes_per_step=k,
                                          average_aggregated_gradients=True)
            model.compile(optimizer=opt, loss="mse")
            model.fit(shard(x, N, R, B), shard(y, N, R, B), batch_size=B, epochs=1,
                      shuffle=False, verbose=0, callbacks=[SameEveryStep(label)])
            def reference():
                ref = mlp()
                ref.compile(optimizer=OPTS[name](), loss="mse")
                ref.fit(x, y, batch_size=N * B * k, epochs=1, shuffle=False, verbose=0)
                return to_np(ref.weights), to_np(ref.optimizer.variables)[2:]
            ref_weights, ref_slots = on_root(reference)
            C.close(label + " vs one process", to_np(model.weights), ref_weights,
                    **TOL[name])
            C.close(label + " optimizer state vs one process",
                    to_np(opt.variables)[2:], ref_slots, **TOL[name])
            C.expect(int(opt.iterations) == passes // k, label + " iterations",
                     "iterations %d, expected %d" % (int(opt.iterations), passes // k))
    # A custom train_step calling optimizer.apply directly.
    label = "keras custom train_step sgd"
    model = custom_step_mlp()
    model.compile(optimizer=hk.DistributedOptimizer(OPTS["sgd"]()))
    model.fit(shard(x, N, R, B), shard(y, N, R, B), batch_size=B, epochs=1,
              shuffle=False, verbose=0, callbacks=[SameEveryStep(label)])
    def reference():
        ref = custom_step_mlp()
        ref.compile(optimizer=OPTS["sgd"]())
        ref.fit(x, y, batch_size=N * B, epochs=1, shuffle=False, verbose=0)
        return to_np(ref.weights)
    C.close(label + " vs one process", to_np(model.weights), on_root(reference),
            **TOL["sgd"])


# ---------------------------------------------------------------------------
# TF2 custom loops


def tf2_train(model, opt, xs, ys, batch, tape_kwargs=None, distributed_tape=True,
              broadcast=True, label=None):
    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = mse(model, x, y)
        if distributed_tape:
            tape = hvd.DistributedGradientTape(tape, **(tape_kwargs or {}))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    for i, start in enumerate(range(0, len(xs), batch)):
        step(tf.constant(xs[start:start + batch]), tf.constant(ys[start:start + batch]))
        if i == 0 and broadcast:
            hvd.broadcast_variables(model.variables + opt.variables, root_rank=0)
        if label:
            C.same_on_all_ranks("%s after step %d" % (label, i),
                                to_np(model.weights) + to_np(opt.variables))


def tf2_equivalence():
    passes = 8
    x, y = make_data(passes, N, B, DIM, seed=99)
    for name in ("sgd", "adam"):
        label = "tf2 tape %s" % name
        model, opt = mlp(), OPTS[name]()
        tf2_train(model, opt, shard(x, N, R, B), shard(y, N, R, B), B, label=label)
        def reference(batch):
            ref, ref_opt = mlp(), OPTS[name]()
            tf2_train(ref, ref_opt, x, y, batch, distributed_tape=False, broadcast=False)
            return to_np(ref.weights)
        C.close(label + " vs one process", to_np(model.weights),
                on_root(lambda: reference(N * B)), **TOL[name])
        # backward_passes_per_step=2: plain tape + DistributedOptimizer (the
        # tf_hvd factory, which returns the Keras wrapper).
        label = "tf2 DistributedOptimizer %s bpps=2" % name
        model = mlp()
        opt = hvd.DistributedOptimizer(OPTS[name](), backward_passes_per_step=2,
                                       average_aggregated_gradients=True)
        tf2_train(model, opt, shard(x, N, R, B), shard(y, N, R, B), B,
                  distributed_tape=False, label=label)
        C.close(label + " vs one process", to_np(model.weights),
                on_root(lambda: reference(2 * N * B)), **TOL[name])
        C.expect(int(opt.iterations) == passes // 2, label + " iterations")


# ---------------------------------------------------------------------------
# DistributedGradientTape features, checked on the gradients themselves


def tape_features():
    x, y = make_data(1, N, B, DIM, seed=7)
    xs, ys = tf.constant(shard(x, N, R, B)), tf.constant(shard(y, N, R, B))
    model = mlp()
    variables = model.trainable_variables
    with tf.GradientTape() as tape:
        loss = mse(model, tf.constant(x), tf.constant(y))
    ref = to_np(tape.gradient(loss, variables))

    def dist_grads(kwargs, in_function, sources=None, persistent_scale=None):
        srcs = variables if sources is None else sources

        def body(xb, yb):
            with tf.GradientTape(persistent=persistent_scale is not None) as t:
                loss = mse(model, xb, yb)
                if persistent_scale is not None:
                    scaled = loss * persistent_scale
            t = hvd.DistributedGradientTape(t, **kwargs)
            grads = t.gradient(loss, srcs)
            if persistent_scale is not None:
                grads = (grads, t.gradient(scaled, srcs))
            return grads

        fn = tf.function(body) if in_function else body
        return fn(xs, ys)

    cases = [
        ("default", {}, dict(rtol=1e-5, atol=1e-6)),
        ("fp16", dict(compression=hvd.Compression.fp16), dict(rtol=3e-3, atol=2e-3)),
        # bfloat16 keeps 8 mantissa bits: each rank's gradient is rounded by < 2**-8
        ("bf16", dict(compression=hvd.Compression.bf16), dict(rtol=8e-3, atol=4e-3)),
        ("groups=2", dict(groups=2), dict(rtol=1e-5, atol=1e-6)),
        ("num_groups=3", dict(num_groups=3), dict(rtol=1e-5, atol=1e-6)),
        ("groups=[[kernel0, bias1]]", dict(groups=[[variables[0], variables[3]]]),
         dict(rtol=1e-5, atol=1e-6)),
        ("predivide=2", dict(gradient_predivide_factor=2.0), dict(rtol=1e-5, atol=1e-6)),
    ]
    for in_function in (False, True):
        where = "tf.function" if in_function else "eager"
        for label, kwargs, tol in cases:
            grads = dist_grads(kwargs, in_function)
            C.close("tape %s (%s)" % (label, where), to_np(grads), ref, **tol)
            C.same_on_all_ranks("tape %s (%s) same on ranks" % (label, where),
                                to_np(grads))
        grads = dist_grads(dict(op=hvd.Sum), in_function)
        C.close("tape op=Sum (%s)" % where, to_np(grads), [N * g for g in ref])
        # None gradients: a variable the loss does not use.
        unused = keras.Variable(np.ones((3,), np.float32), name="unused")
        grads = dist_grads({}, in_function, sources=list(variables) + [unused])
        C.expect(grads[-1] is None, "tape None gradient stays None (%s)" % where)
        C.close("tape with a None gradient (%s)" % where, to_np(grads[:-1]), ref)
        # Persistent tape: two gradient() calls, both reduced.
        g1, g2 = dist_grads({}, in_function, persistent_scale=2.0)
        C.close("persistent tape first call (%s)" % where, to_np(g1), ref)
        C.close("persistent tape second call (%s)" % where, to_np(g2),
                [2 * g for g in ref])
        # Nested structure of sources.
        nested = {"first": [variables[0], variables[1]], "second": (variables[2], variables[3])}
        grads = dist_grads({}, in_function, sources=nested)
        C.expect(isinstance(grads, dict) and isinstance(grads["second"], tuple),
                 "tape nested structure kept (%s)" % where)
        C.close("tape nested sources (%s)" % where,
                to_np(grads["first"]) + to_np(grads["second"]), ref)
    # PartialDistributedGradientTape: the local layer's gradients are not reduced;
    # as in Horovod they are divided by size() unless scale_local_gradients=False.
    with tf.GradientTape() as t:
        loss = mse(model, xs, ys)
    local_ref = to_np(t.gradient(loss, variables))
    for scale in (True, False):
        with tf.GradientTape() as t:
            loss = mse(model, xs, ys)
        t = hvd.PartialDistributedGradientTape(t, local_layers=[model.layers[1]],
                                               scale_local_gradients=scale)
        grads = to_np(t.gradient(loss, variables))
        div = N if scale else 1
        C.close("partial tape shared layer (scale=%s)" % scale, grads[:2], ref[:2])
        C.close("partial tape local layer (scale=%s)" % scale, grads[2:],
                [g / div for g in local_ref[2:]])
    with tf.GradientTape() as t:
        loss = mse(model, xs, ys)
    t = hvd.PartialDistributedGradientTape(t, local_layers=model.layers[1])
    local, shared = t.get_local_and_global_gradients(loss, variables)
    C.close("get_local_and_global_gradients", to_np(local) + to_np(shared),
            [g / N for g in local_ref[2:]] + ref[:2])


# ---------------------------------------------------------------------------
# Sparse (embedding) gradients


VOCAB, SEQ, EMB = 20, 3, 4


def embedding_model(seed=0):
    model = keras.Sequential([keras.Input((SEQ,), dtype="int32"),
                              keras.layers.Embedding(VOCAB, EMB),
                              keras.layers.Flatten(),
                              keras.layers.Dense(1)])
    set_init(model, seed)
    return model


def sparse_gradients():
    passes = 6
    rs = np.random.RandomState(5)
    ids = rs.randint(0, VOCAB, size=(passes * N * B, SEQ)).astype(np.int32)
    y = rs.randn(passes * N * B, 1).astype(np.float32)
    model = embedding_model()
    variables = model.trainable_variables
    first = slice(0, N * B)
    with tf.GradientTape() as tape:
        loss = mse(model, ids[first], y[first])
    ref_raw = tape.gradient(loss, variables)
    C.expect(isinstance(ref_raw[0], tf.IndexedSlices),
             "embedding gradient is IndexedSlices", "got %s" % type(ref_raw[0]))
    ref = [tf.convert_to_tensor(g).numpy() for g in ref_raw]
    xs, ys = shard(ids[first], N, R, B), shard(y[first], N, R, B)
    for sparse_as_dense in (False, True):
        for in_function in (False, True):
            def body(xb, yb):
                with tf.GradientTape() as t:
                    loss = mse(model, xb, yb)
                t = hvd.DistributedGradientTape(t, sparse_as_dense=sparse_as_dense)
                return t.gradient(loss, variables)
            fn = tf.function(body) if in_function else body
            grads = fn(tf.constant(xs), tf.constant(ys))
            label = "sparse_as_dense=%s %s" % (sparse_as_dense,
                                               "tf.function" if in_function else "eager")
            C.expect(isinstance(grads[0], tf.IndexedSlices) != sparse_as_dense,
                     label + " result type", "got %s" % type(grads[0]))
            dense = [tf.convert_to_tensor(g).numpy() for g in grads]
            C.close(label + " embedding gradient", dense, ref)
            C.same_on_all_ranks(label + " same on ranks", dense)
    # Training an embedding model through model.fit, SGD and Adam.
    for name in ("sgd", "adam"):
        label = "keras fit embedding %s" % name
        model = embedding_model()
        model.compile(optimizer=hk.DistributedOptimizer(OPTS[name]()), loss="mse")
        model.fit(shard(ids, N, R, B), shard(y, N, R, B), batch_size=B, epochs=1,
                  shuffle=False, verbose=0, callbacks=[SameEveryStep(label)])
        def reference():
            ref_model = embedding_model()
            ref_model.compile(optimizer=OPTS[name](), loss="mse")
            ref_model.fit(ids, y, batch_size=N * B, epochs=1, shuffle=False, verbose=0)
            return to_np(ref_model.weights)
        C.close(label + " vs one process", to_np(model.weights), on_root(reference),
                **TOL[name])


# ---------------------------------------------------------------------------
# Broadcast makes differently initialised ranks identical


def broadcast_checks():
    x, y = make_data(4, N, B, DIM, seed=3)
    xs, ys = shard(x, N, R, B), shard(y, N, R, B)
    # Keras callback.
    model = mlp(seed=100 + R)
    C.differ_across_ranks("keras models start different", to_np(model.weights))
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.Adam(0.01)),
                  loss="mse")
    model.fit(xs, ys, batch_size=B, epochs=1, shuffle=False, verbose=0,
              callbacks=[hk.callbacks.BroadcastGlobalVariablesCallback(0),
                         SameEveryStep("keras broadcast callback")])
    # TF2: broadcast_variables after the first step.
    model, opt = mlp(seed=200 + R), keras.optimizers.Adam(0.01)
    C.differ_across_ranks("tf2 models start different", to_np(model.weights))
    tf2_train(model, opt, xs, ys, B, label="tf2 broadcast_variables")
    # Plain functions on a fresh model: everyone gets rank 0's initial values.
    model = mlp(seed=300 + R)
    hvd.broadcast_variables(model.variables, root_rank=0)
    C.close("broadcast_variables gives rank 0's values", to_np(model.weights),
            to_np(mlp(seed=300).weights), rtol=0, atol=0)
    model = mlp(seed=400 + R)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    hk.broadcast_global_variables(0, model=model)
    C.close("keras broadcast_global_variables(model=)", to_np(model.weights),
            to_np(mlp(seed=400).weights), rtol=0, atol=0)


# ---------------------------------------------------------------------------
# Callbacks


class LocalLogs(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.epochs = []

    def on_epoch_end(self, epoch, logs=None):
        self.epochs.append(dict(logs))


class LrRecorder(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.epoch = None
        self.seen = []

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        lr = float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate))
        self.seen.append((self.epoch, batch, lr))


def metric_average():
    rs = np.random.RandomState(11 + R)        # rank-specific data
    x = rs.randn(6 * B, DIM).astype(np.float32)
    y = rs.randn(6 * B, 1).astype(np.float32)
    vx = rs.randn(2 * B, DIM).astype(np.float32)
    vy = rs.randn(2 * B, 1).astype(np.float32)
    model = mlp()
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.01)),
                  loss="mse", metrics=["mae"])
    local = LocalLogs()
    hist = model.fit(x, y, batch_size=B, epochs=2, shuffle=False, verbose=0,
                     validation_data=(vx, vy),
                     callbacks=[local, hk.callbacks.MetricAverageCallback()])
    keys = sorted(local.epochs[0])
    C.expect(set(keys) >= {"loss", "mae", "val_loss", "val_mae"},
             "metric names", "got %s" % keys)
    everyone = hvd.allgather_object(local.epochs)
    C.differ_across_ranks("local metrics differ across ranks",
                          [np.array([local.epochs[0]["loss"]])])
    for epoch in range(2):
        for key in keys:
            expected = np.mean([everyone[r][epoch][key] for r in range(N)])
            C.close("MetricAverageCallback %s epoch %d" % (key, epoch),
                    [hist.history[key][epoch]], [expected], rtol=1e-6, atol=1e-7)
    C.same_on_all_ranks("averaged history same on ranks",
                        [np.array(hist.history[k]) for k in keys])


def lr_callbacks():
    steps = 4
    x, y = make_data(steps, 1, B, DIM, seed=8)
    # Warmup: from initial_lr / size to initial_lr over 2 epochs, batch by batch.
    initial = 0.1 * N
    model = mlp()
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(initial)),
                  loss="mse")
    rec = LrRecorder()
    hist = model.fit(x, y, batch_size=B, epochs=3, shuffle=False, verbose=0,
                     callbacks=[hk.callbacks.LearningRateWarmupCallback(
                         initial, warmup_epochs=2, verbose=0), rec])
    for epoch, batch, lr in rec.seen:
        if epoch < 2:
            e = epoch + batch / float(steps) + 1.0 / steps
            expected = initial / N * (e * (N - 1) / 2.0 + 1)
        else:
            expected = initial
        C.close("warmup lr epoch %d batch %d" % (epoch, batch), [lr], [expected],
                rtol=1e-6, atol=1e-7)
    C.close("warmup logs learning_rate", hist.history["learning_rate"],
            [initial / N * (1.0 * (N - 1) / 2.0 + 1), initial, initial],
            rtol=1e-6, atol=1e-7)
    # Staircase schedule on epochs [1, 3).
    model = mlp()
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.3)),
                  loss="mse")
    rec = LrRecorder()
    model.fit(x, y, batch_size=B, epochs=4, shuffle=False, verbose=0,
              callbacks=[hk.callbacks.LearningRateScheduleCallback(
                  0.2, lambda e: 0.5 ** e, start_epoch=1, end_epoch=3), rec])
    expected = {0: 0.3, 1: 0.1, 2: 0.05, 3: 0.05}
    for epoch, batch, lr in rec.seen:
        C.close("schedule lr epoch %d batch %d" % (epoch, batch), [lr],
                [expected[epoch]], rtol=1e-6, atol=1e-7)
    # Smooth schedule (staircase=False), steps_per_epoch detected from fit.
    model = mlp()
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.3)),
                  loss="mse")
    rec = LrRecorder()
    model.fit(x, y, batch_size=B, epochs=2, shuffle=False, verbose=0,
              callbacks=[hk.callbacks.LearningRateScheduleCallback(
                  0.2, lambda e: 1.0 + e, staircase=False), rec])
    for epoch, batch, lr in rec.seen:
        C.close("smooth schedule lr epoch %d batch %d" % (epoch, batch), [lr],
                [0.2 * (1.0 + epoch + batch / float(steps))], rtol=1e-6, atol=1e-7)
    C.same_on_all_ranks("learning rates same on ranks",
                        [np.array([s[2] for s in rec.seen])])


def checkpoint_and_load():
    x, y = make_data(4, N, B, DIM, seed=21)
    vx, vy = make_data(1, N, B, DIM, seed=22)
    model = mlp()
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.Adam(0.01)),
                  loss="mse")
    path = os.path.join(TMP, "best_rank%d.keras" % R)
    model.fit(shard(x, N, R, B), shard(y, N, R, B), batch_size=B, epochs=2,
              shuffle=False, verbose=0, validation_data=(vx, vy),
              callbacks=[hk.callbacks.MetricAverageCallback(),
                         hk.callbacks.BestModelCheckpoint(filepath=path)])
    C.expect(os.path.exists(path) == (R == 0), "BestModelCheckpoint saves on rank 0 only",
             "rank %d: exists=%s" % (R, os.path.exists(path)))
    # Rank 0 saves the model; everyone loads it with the optimizer wrapped.
    saved = os.path.join(TMP, "saved.keras")
    if R == 0:
        model.save(saved)
    hvd.allgather_object(None)        # everyone waits for the file
    loaded = hk.load_model(saved)
    C.expect(hk.is_distributed_optimizer(loaded.optimizer), "load_model wraps optimizer",
             "got %s" % type(loaded.optimizer))
    C.expect(int(loaded.optimizer.iterations) == int(model.optimizer.iterations),
             "load_model keeps optimizer iterations")
    C.close("load_model weights", to_np(loaded.weights), to_np(model.weights),
            rtol=0, atol=0)
    loaded.fit(shard(x, N, R, B), shard(y, N, R, B), batch_size=B, epochs=1,
               shuffle=False, verbose=0, callbacks=[SameEveryStep("loaded model fit")])


def keras_values():
    mine = np.array([float(R), 2.0 * R], np.float32)
    C.close("hk.allreduce", [hk.allreduce(mine, name="kv_allreduce")],
            [[np.mean(range(N)), 2 * np.mean(range(N))]])
    C.close("hk.allreduce Sum", [hk.allreduce(mine, op=hvd.Sum)],
            [[sum(range(N)), 2.0 * sum(range(N))]])
    C.close("hk.allgather", [hk.allgather(mine[None, :])],
            [np.array([[r, 2.0 * r] for r in range(N)], np.float32)])
    C.close("hk.broadcast", [hk.broadcast(mine, root_rank=N - 1)],
            [[N - 1.0, 2.0 * (N - 1)]])


C.section("keras_equivalence", keras_equivalence)
C.section("tf2_equivalence", tf2_equivalence)
C.section("tape_features", tape_features)
C.section("sparse_gradients", sparse_gradients)
C.section("broadcast", broadcast_checks)
C.section("metric_average", metric_average)
C.section("lr_callbacks", lr_callbacks)
C.section("checkpoint_and_load", checkpoint_and_load)
C.section("keras_values", keras_values)
sys.exit(C.finish())

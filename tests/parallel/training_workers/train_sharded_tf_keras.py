"""The sharded DistributedOptimizer with tf-keras 2 optimizers (TF_USE_LEGACY_KERAS=1),
against the unsharded tf-keras DistributedOptimizer. Run under the launcher:

    TF_USE_LEGACY_KERAS=1 python -m tf_hvd.runner -np 2 python train_sharded_tf_keras.py

model.fit and a tf.function custom loop (a plain tf.GradientTape into
apply_gradients), SGD with momentum and Adam, 24 steps: weights and losses
within rtol 1e-5, atol 1e-6 of the unsharded optimizer, identical on every rank,
each rank's slots holding its slice; the gathered state equals the unsharded
optimizer's; global_clipnorm, clipnorm and backward_passes_per_step; a
checkpoint (hvd.save_model) holding the unsharded state, loaded unsharded and
sharded (hvd.load_model(sharded=True)); elastic commit, restore
and re-shard; the optimizers it refuses, named.
"""

import os
import sys
import tempfile

os.environ["TF_USE_LEGACY_KERAS"] = "1"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tf_hvd as hvd  # noqa: E402
import tf_hvd.keras as hk  # noqa: E402
import sharded_lib  # noqa: E402
from sharded_lib import B, DIM, STEPS, TOL, to_np  # noqa: E402
from trainlib import Checks, make_data, shard  # noqa: E402

keras = tf.keras
hvd.init()
N, R = hvd.size(), hvd.rank()
C = Checks(hvd)
DIR = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="sharded_tf_keras_")
OPTS = {
    "sgd_momentum": lambda **kw: keras.optimizers.SGD(0.05, momentum=0.9, **kw),
    "adam": lambda **kw: keras.optimizers.Adam(0.01, **kw),
}


def mlp(seed=0):
    return sharded_lib.mlp(keras, seed)


def fit(opt, x, y):
    return sharded_lib.fit(keras, opt, x, y, hvd)


def check_holds_slice(label, opt, model):
    sharded_lib.check_holds_slice(C, hvd, label, opt, model)


def equivalence():
    x, y = make_data(STEPS, N, B, DIM)
    for name in ("sgd_momentum", "adam"):
        label = "tf-keras fit %s" % name
        ref, ref_losses = fit(hk.DistributedOptimizer(OPTS[name]()), x, y)
        opt = hk.DistributedOptimizer(OPTS[name](), sharded=True)
        model, losses = fit(opt, x, y)
        sharded_lib.check_fit_equals(C, hvd, label, opt, model, losses, ref, ref_losses,
                                     STEPS)
        C.expect(max(float(np.abs(a - b).max()) for a, b in
                     zip(to_np(model.weights), to_np(mlp().weights))) > 1e-3,
                 label + " trained (the weights moved)")
    xs, ys = shard(x, N, R, B), shard(y, N, R, B)
    for name in ("sgd_momentum", "adam"):
        results = []
        for sharded in (False, True):
            model = mlp()
            opt = hvd.DistributedOptimizer(OPTS[name](), sharded=sharded)

            @tf.function
            def step(xb, yb):
                with tf.GradientTape() as plain:
                    loss = tf.reduce_mean(tf.square(model(xb, training=True) - yb))
                # the unsharded tf-keras optimizer applies what it is given (Horovod)
                tape = plain if sharded else hvd.DistributedGradientTape(plain)
                grads = tape.gradient(loss, model.trainable_variables)
                opt.apply_gradients(zip(grads, model.trainable_variables))
                return loss
            losses = [float(step(xs[i * B:(i + 1) * B], ys[i * B:(i + 1) * B]))
                      for i in range(STEPS)]
            results.append((to_np(model.weights), losses))
        label = "tf-keras custom loop %s" % name
        C.close(label + " weights sharded vs unsharded", results[1][0], results[0][0], **TOL)
        C.close(label + " losses sharded vs unsharded", [results[1][1]], [results[0][1]],
                **TOL)
        C.same_on_all_ranks(label + " weights on every rank", results[1][0])


def composition():
    x, y = make_data(STEPS, N, B, DIM)
    for label, kwargs, opt_kwargs in (
            ("global_clipnorm", {}, dict(global_clipnorm=0.05)),
            ("clipnorm", {}, dict(clipnorm=0.02)),
            ("backward_passes_per_step=2", dict(backward_passes_per_step=2), {})):
        ref, ref_losses = fit(hk.DistributedOptimizer(OPTS["adam"](**opt_kwargs), **kwargs),
                              x, y)
        model, losses = fit(hk.DistributedOptimizer(OPTS["adam"](**opt_kwargs),
                                                    sharded=True, **kwargs), x, y)
        C.close("tf-keras %s weights sharded vs unsharded" % label, to_np(model.weights),
                to_np(ref.weights), **TOL)


def state():
    """hvd.save_model of a sharded tf-keras model holds the unsharded state (loaded
    unsharded); elastic commit/restore/sync (re-shard at this size) leave the
    training as an unbroken run's."""
    x, y = make_data(STEPS, N, B, DIM)
    model, _ = fit(hk.DistributedOptimizer(OPTS["adam"](), sharded=True), x, y)
    whole = hvd.broadcast_object(model.optimizer.gather_state(root_rank=0), root_rank=0)
    path = os.path.join(DIR, "sharded_tf_keras.keras")
    hk.save_model(model, path)
    hvd.barrier()
    loaded = hk.load_model(path)
    C.close("tf-keras save_model: the loaded optimizer holds the unsharded state",
            to_np(loaded.optimizer.variables), whole, rtol=0, atol=0)
    loaded = hk.load_model(path, sharded=True)
    C.expect(getattr(type(loaded.optimizer), "_hvd_sharded", False),
             "tf-keras load_model(sharded=True) gives a sharded optimizer")
    C.close("tf-keras load_model(sharded=True): each rank took its slices",
            loaded.optimizer.gather_state(root_rank=None), whole, rtol=0, atol=0)
    check_holds_slice("tf-keras load_model(sharded=True)", loaded.optimizer, loaded)
    # elastic: commit, train, roll back, re-shard (sync), train again
    model, _ = fit(hk.DistributedOptimizer(OPTS["adam"](), sharded=True), x, y)
    st = hk.elastic.KerasState(model, epoch=0)
    committed = model.optimizer.gather_state(root_rank=None)
    xs, ys = shard(x, N, R, B), shard(y, N, R, B)
    model.fit(xs, ys, batch_size=B, epochs=1, shuffle=False, verbose=0)
    st.restore()
    C.close("tf-keras elastic restore: the committed state",
            model.optimizer.gather_state(root_rank=None), committed, rtol=0, atol=0)
    st.on_reset()
    st.sync()
    C.close("tf-keras elastic sync (re-shard): the committed state",
            model.optimizer.gather_state(root_rank=None), committed, rtol=0, atol=0)
    model.fit(xs, ys, batch_size=B, epochs=1, shuffle=False, verbose=0)
    unbroken, _ = fit(hk.DistributedOptimizer(OPTS["adam"](), sharded=True), x, y)
    unbroken.fit(xs, ys, batch_size=B, epochs=1, shuffle=False, verbose=0)
    C.close("tf-keras elastic: after the re-shard, as an unbroken run",
            to_np(model.weights), to_np(unbroken.weights), **TOL)


def bad_input():
    C.raises("tf-keras legacy optimizer is refused",
             lambda: hk.DistributedOptimizer(keras.optimizers.legacy.Adam(), sharded=True),
             ValueError, ["cannot shard the state of", "legacy.", "Adam: with tf-keras "
                          "(TF_USE_LEGACY_KERAS=1) it shards tf_keras.optimizers.SGD, Adam"])
    C.raises("tf-keras Adafactor is refused",
             lambda: hk.DistributedOptimizer(keras.optimizers.Adafactor(), sharded=True),
             ValueError, ["Adafactor: with tf-keras", "use sharded=False for Adafactor"])
    C.raises("tf-keras LossScaleOptimizer is refused",
             lambda: hk.DistributedOptimizer(keras.mixed_precision.LossScaleOptimizer(
                 keras.optimizers.Adam()), sharded=True),
             ValueError, ["cannot shard the state of", "nor a LossScaleOptimizer"])


C.section("equivalence", equivalence)
C.section("composition", composition)
C.section("state", state)
C.section("bad_input", bad_input)
sys.exit(C.finish())

"""What the sharded-optimizer workers share, for the Keras given (Keras 3 in
train_sharded.py, tf-keras 2 in train_sharded_tf_keras.py): the model, a fit
that records the losses, and the checks that a sharded fit equals the unsharded
one and that each rank's slots hold its slice::

    model, losses = fit(keras, opt, x, y, hvd)
    check_fit_equals(C, hvd, "fit adam", opt, model, losses, ref, ref_losses, 24)
"""

import numpy as np

from trainlib import initial_values, shard

B, DIM, HID, STEPS = 4, 6, 7, 24
TOL = dict(rtol=1e-5, atol=1e-6)


def to_np(values):
    return [np.asarray(v.numpy()) for v in values]


def mlp(keras, seed=0):
    model = keras.Sequential([keras.Input((DIM,)),
                              keras.layers.Dense(HID, activation="tanh"),
                              keras.layers.Dense(3, activation="tanh"),
                              keras.layers.Dense(1)])
    shapes = [tuple(v.shape) for v in model.weights]
    for v, value in zip(model.weights, initial_values(shapes, seed)):
        v.assign(value)
    return model


def fit(keras, opt, x, y, hvd, model=None):
    """(model, losses of every step): one epoch of this rank's shard of x, y."""
    model = model or mlp(keras)
    model.compile(optimizer=opt, loss="mse")
    losses = []
    record = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: losses.append(float(logs["loss"])))
    n, r = hvd.size(), hvd.rank()
    model.fit(shard(x, n, r, B), shard(y, n, r, B), batch_size=B, epochs=1,
              shuffle=False, verbose=0, callbacks=[record])
    return model, losses


def check_holds_slice(C, hvd, label, opt, model):
    """Each slot of a sharded optimizer holds this rank's slice of the flat
    parameters: sizes add up to the parameter count over the ranks."""
    n = hvd.size()
    total = sum(int(np.prod(v.shape)) for v in model.trainable_variables)
    slots = [v for v in opt.variables if len(v.shape) == 1]
    mine = [int(v.shape[0]) for v in slots]
    everyone = hvd.allgather_object(mine)
    expect = [total // n + (1 if r < total % n else 0) for r in range(n)]
    C.expect(all(e and e == [expect[r]] * len(mine) for r, e in enumerate(everyone)),
             label + " slots hold 1/N", "slot sizes per rank %s, expected %s each"
             % (everyone, expect))


def check_fit_equals(C, hvd, label, opt, model, losses, ref, ref_losses, steps):
    """A sharded fit (``opt``, ``model``) equals the unsharded one (``ref``):
    weights, losses, the gathered state; the same on every rank; each rank
    holding its slice."""
    C.close(label + " weights sharded vs unsharded", to_np(model.weights),
            to_np(ref.weights), **TOL)
    C.close(label + " losses sharded vs unsharded", [losses], [ref_losses], **TOL)
    C.same_on_all_ranks(label + " weights on every rank", to_np(model.weights))
    C.expect(int(opt.iterations.numpy()) == steps, label + " iterations")
    check_holds_slice(C, hvd, label, opt, model)
    # The unsharded state, gathered, equals the unsharded optimizer's.
    full = hvd.broadcast_object(opt.gather_state(root_rank=0), root_rank=0)
    C.close(label + " gathered state vs unsharded", full, to_np(ref.optimizer.variables),
            **TOL)

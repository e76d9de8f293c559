"""The sharded DistributedOptimizer in one process (size 1, where the one rank
holds the whole flat shard): its layout, equality with the plain optimizer for
every supported class, the errors, and checkpoints in the ordinary Keras
format. The multi-rank behaviour is tested in tests/parallel/test_sharded_optimizer.py."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from one_process import initialized  # noqa: F401 (hvd.init() once, autouse)
from one_process import numpy_values, regression_data, small_model

import tf_hvd as hvd
import tf_hvd.keras as hk
from tf_hvd._keras import flavors
from tf_hvd._keras.sharding import full_state
from tf_hvd._keras.sharding.layout import ShardLayout, mismatch_message, shard_bounds
from tf_hvd._keras.sharding.support import SUPPORTED
from tf_hvd.exceptions import ShardingError


def _data(n=32, seed=1):
    return regression_data(n, seed, target=lambda x: x[:, :1] * 0.5 + 0.1)


def _fit(opt, model=None, epochs=2):
    model = model or small_model()
    model.compile(optimizer=opt, loss="mse")
    x, y = _data()
    model.fit(x, y, batch_size=8, epochs=epochs, shuffle=False, verbose=0)
    return model


# -- the layout ---------------------------------------------------------------


def test_shard_bounds_follow_reducescatter():
    assert [shard_bounds(10, 3, q) for q in range(3)] == [(0, 4), (4, 7), (7, 10)]
    assert [shard_bounds(2, 3, q) for q in range(3)] == [(0, 1), (1, 2), (2, 2)]


def test_layout_cuts_variables_into_flat_slices():
    layout = ShardLayout([("k", (6, 8), "float32"), ("b", (8,), "float32"),
                          ("h", (3,), "float16"), ("k2", (8, 1), "float32")], 3)
    f32, f16 = layout.groups
    assert (f32.dtype, f32.members, f32.total) == ("float32", [0, 1, 3], 64)
    assert (f16.dtype, f16.members, f16.total) == ("float16", [2], 3)
    assert [f32.bounds(q) for q in range(3)] == [(0, 22), (22, 43), (43, 64)]
    assert f32.pieces(0) == [(0, 0, 22, 0)]
    assert f32.pieces(1) == [(0, 22, 43, 0)]
    assert f32.pieces(2) == [(0, 43, 48, 0), (1, 0, 8, 5), (3, 0, 8, 13)]
    assert sum(f32.shard_size(q) for q in range(3)) == 64
    assert layout.group_of[3] == (0, 2)


def test_mismatch_message_names_the_variable_and_the_ranks():
    sig = [((6, 7), "float32"), ((7,), "float32")]
    other = [((6, 8), "float32"), ((7,), "float32")]
    names = ["dense/kernel", "dense/bias"]
    assert mismatch_message([sig, sig, sig], [names] * 3) is None
    assert mismatch_message([sig, other, sig], [names] * 3) == (
        "sharded optimizer: trainable variable 0 differs across ranks: 'dense/kernel' has "
        "shape (6, 7) float32 on ranks 0, 2 but shape (6, 8) float32 on rank 1")
    assert mismatch_message([sig, [((6, 7), "float16"), sig[1]]],
                            [names, ["dense_1/kernel", "dense_1/bias"]]) == (
        "sharded optimizer: trainable variable 0 differs across ranks: 'dense/kernel' on "
        "rank 0, 'dense_1/kernel' on rank 1 has shape (6, 7) float32 on rank 0 but shape "
        "(6, 7) float16 on rank 1")
    assert mismatch_message([sig, sig[:1]], [names, names[:1]], ranks=[4, 6]) == (
        "sharded optimizer: the number of trainable variables differs across ranks: 2 on "
        "rank 4; 1 on rank 6; every rank must build the optimizer on the same variables")


# -- one rank: the same training as the plain optimizer ---------------------------

MAKERS = {
    "SGD": lambda **kw: keras.optimizers.SGD(0.05, momentum=0.9, nesterov=True, **kw),
    "Adam": lambda **kw: keras.optimizers.Adam(0.01, amsgrad=True, **kw),
    "AdamW": lambda **kw: keras.optimizers.AdamW(0.01, **kw),
    "Adamax": lambda **kw: keras.optimizers.Adamax(0.01, **kw),
    "Nadam": lambda **kw: keras.optimizers.Nadam(0.01, **kw),
    "RMSprop": lambda **kw: keras.optimizers.RMSprop(0.01, centered=True, momentum=0.5,
                                                     **kw),
    "Adagrad": lambda **kw: keras.optimizers.Adagrad(0.1, **kw),
    "Adadelta": lambda **kw: keras.optimizers.Adadelta(1.0, **kw),
    "Ftrl": lambda **kw: keras.optimizers.Ftrl(0.05, l1_regularization_strength=0.01, **kw),
    "Lion": lambda **kw: keras.optimizers.Lion(0.001, **kw),
}


def test_every_supported_optimizer_is_tested():
    assert sorted(MAKERS) == sorted(SUPPORTED)


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_sharded_equals_plain_on_one_rank(name):
    plain = _fit(MAKERS[name]())
    opt = hk.DistributedOptimizer(MAKERS[name](), sharded=True)
    sharded = _fit(opt)
    np.testing.assert_allclose(
        np.concatenate([w.ravel() for w in numpy_values(sharded.weights)]),
        np.concatenate([w.ravel() for w in numpy_values(plain.weights)]), rtol=1e-6, atol=1e-7)
    # The one rank's slots are flat, the whole 50 parameters each.
    assert all(tuple(v.shape) in ((), (50,)) for v in opt.variables)
    np.testing.assert_allclose(
        np.concatenate([np.ravel(v) for v in opt.gather_state()]),
        np.concatenate([np.ravel(v) for v in numpy_values(plain.optimizer.variables)]),
        rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("kwargs", [dict(clipnorm=0.05), dict(global_clipnorm=0.05),
                                    dict(clipvalue=0.01)], ids=lambda k: list(k)[0])
def test_clipping_equals_plain(kwargs):
    plain = _fit(keras.optimizers.Adam(0.01, **kwargs))
    sharded = _fit(hvd.DistributedOptimizer(keras.optimizers.Adam(0.01, **kwargs),
                                            sharded=True))
    for a, b in zip(numpy_values(sharded.weights), numpy_values(plain.weights)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_loss_scale_and_backward_passes():
    plain = _fit(keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam(0.01)))
    opt = hk.DistributedOptimizer(
        keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam(0.01)), sharded=True)
    sharded = _fit(opt)
    for a, b in zip(numpy_values(sharded.weights), numpy_values(plain.weights)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert [tuple(v.shape) for v in opt.variables] == [()] * 6 + [(50,), (50,)]
    # backward_passes_per_step=2 on batches of 8 == one update per 16 samples.
    big = small_model()
    big.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9), loss="mse")
    x, y = _data()
    big.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0)
    opt = hk.DistributedOptimizer(keras.optimizers.SGD(0.05, momentum=0.9), sharded=True,
                                  backward_passes_per_step=2,
                                  average_aggregated_gradients=True)
    small = _fit(opt, epochs=1)
    assert int(opt.iterations) == 2
    for a, b in zip(numpy_values(small.weights), numpy_values(big.weights)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_custom_loop_in_tf_function_builds_inside_the_trace():
    x, y = _data()
    results = []
    for sharded in (False, True):
        model = small_model()
        opt = hvd.DistributedOptimizer(keras.optimizers.Adam(0.01), sharded=sharded)

        @tf.function
        def step(xb, yb):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(xb) - yb))
            tape = hvd.DistributedGradientTape(tape)
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
        for i in range(4):
            step(x[i * 8:(i + 1) * 8], y[i * 8:(i + 1) * 8])
        results.append(numpy_values(model.weights))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_a_built_optimizer_hands_its_state_over():
    plain = _fit(keras.optimizers.Adam(0.01), epochs=1)
    opt = hk.DistributedOptimizer(plain.optimizer, sharded=True)
    assert int(opt.iterations) == 4
    for a, b in zip(opt.gather_state(), numpy_values(plain.optimizer.variables)):
        np.testing.assert_array_equal(a, b)


def test_broadcasts_leave_the_slots_alone():
    model = _fit(hk.DistributedOptimizer(keras.optimizers.Adam(0.01), sharded=True),
                 epochs=1)
    sent = flavors.model_and_optimizer_variables(model)
    assert len(sent) == len(model.variables) + 2   # + iterations, learning_rate
    assert model.optimizer.replicated_variables()[0] is model.optimizer.iterations


# -- errors --------------------------------------------------------------------


def test_unsupported_optimizers_and_options_are_named():
    with pytest.raises(ShardingError) as e:
        hk.DistributedOptimizer(keras.optimizers.Lamb(), sharded=True)
    assert str(e.value) == (
        "DistributedOptimizer(sharded=True) cannot shard the state of "
        "keras.src.optimizers.lamb.Lamb: sharding cuts variables into flat slices, which "
        "only optimizers with an elementwise update allow. Supported: keras.optimizers.SGD, "
        "Adam, AdamW, Adamax, Nadam, RMSprop, Adagrad, Adadelta, Ftrl, Lion (and a "
        "LossScaleOptimizer around one of them); use sharded=False for Lamb.")
    assert issubclass(ShardingError, ValueError)
    with pytest.raises(ShardingError, match="cannot shard the state of .*Adafactor"):
        hk.DistributedOptimizer(keras.optimizers.Adafactor(), sharded=True)
    with pytest.raises(ValueError, match=r"^DistributedOptimizer\(sharded=True\) supports "
                       r"Keras optimizers only; GradientDescentOptimizer is a TF1"):
        hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1),
                                 sharded=True)
    with pytest.raises(ShardingError, match="not Adasum"):
        hk.DistributedOptimizer(keras.optimizers.SGD(), sharded=True, op=hvd.Adasum)
    with pytest.raises(ShardingError, match="takes no groups"):
        hk.DistributedOptimizer(keras.optimizers.SGD(), sharded=True, groups=2)
    with pytest.raises(ShardingError, match="use_ema=True is not supported"):
        hk.DistributedOptimizer(keras.optimizers.SGD(use_ema=True), sharded=True)
    with pytest.raises(ShardingError, match="use backward_passes_per_step=2"):
        hk.DistributedOptimizer(keras.optimizers.SGD(gradient_accumulation_steps=2),
                                sharded=True)
    opt = hk.DistributedOptimizer(keras.optimizers.AdamW(), sharded=True)
    opt.exclude_from_weight_decay(var_names=["bias"])
    with pytest.raises(ShardingError, match="exclude_from_weight_decay is not supported"):
        opt.build(small_model().trainable_variables)
    with pytest.raises(ShardingError, match="has no local variables"):
        opt.register_local_var(small_model().trainable_variables[0])


def test_unknown_variable_and_mixed_gradients_are_refused():
    model = small_model()
    opt = hk.DistributedOptimizer(keras.optimizers.SGD(0.1), sharded=True)
    opt.build(model.trainable_variables)
    other = keras.Variable(np.zeros(3, np.float32), name="stray")
    with pytest.raises(ShardingError, match="variable 'stray' is not one the optimizer "
                                            "was built on"):
        opt.apply([tf.zeros(3)], [other])
    grads = [tf.zeros(v.shape) for v in model.trainable_variables]
    grads[0]._hvd_reduced = True
    with pytest.raises(ShardingError, match="some gradients were averaged by a "
                                            "DistributedGradientTape and some were not"):
        opt.apply(grads, model.trainable_variables)


# -- checkpoints -----------------------------------------------------------------


def test_checkpoint_is_an_ordinary_keras_file(tmp_path):
    path = str(tmp_path / "m.keras")
    opt = hk.DistributedOptimizer(keras.optimizers.Adam(0.01), sharded=True)
    model = _fit(opt, epochs=1)
    hk.save_model(model, path)
    plain = keras.models.load_model(path)     # plain Keras: the unsharded state
    assert type(plain.optimizer) is keras.optimizers.Adam
    for a, b in zip(numpy_values(plain.optimizer.variables), opt.gather_state()):
        np.testing.assert_array_equal(a, b)
    again = hk.load_model(path, sharded=True)
    assert getattr(type(again.optimizer), "_hvd_sharded", False)
    for a, b in zip(again.optimizer.gather_state(), opt.gather_state()):
        np.testing.assert_array_equal(a, b)
    # Training goes on alike.
    x, y = _data(seed=3)
    for m in (plain, again):
        m.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(numpy_values(again.weights), numpy_values(plain.weights)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_incompatible_checkpoint_names_what_differs(tmp_path):
    path = str(tmp_path / "adam.keras")
    _fit(keras.optimizers.Adam(0.01), epochs=1).save(path)
    model = small_model()
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.1, momentum=0.9),
                                                    sharded=True), loss="mse")
    model.optimizer.build(model.trainable_variables)
    with pytest.raises(ValueError, match=r"incompatible optimizer checkpoint: it holds 10 "
                       r"optimizer variables, but a SGD built on these 4 trainable "
                       r"variables has 6 \(2 of its own and the slots \['momentum'\] per "
                       r"variable\)"):
        model.load_weights(path)
    opt = model.optimizer
    values = [np.zeros(()), np.zeros(()), np.zeros((5, 7)), np.zeros((7,)),
              np.zeros((7, 2)), np.zeros((1,))]
    values[0] = np.zeros((), np.int64)
    with pytest.raises(ShardingError) as e:
        full_state.load(opt._hvd_shard, opt, values)
    assert str(e.value) == (
        "incompatible optimizer checkpoint: variable 4 (slot 'momentum' of trainable "
        "variable '%s' of SGD) has shape (7, 2) in the checkpoint but (7, 1) here"
        % model.trainable_variables[2].path)


def _plain_state(opt):
    return [np.asarray(v) for v in numpy_values(opt.variables)]


@pytest.mark.parametrize("loss_scale", [False, True])
def test_elastic_keras_state_commits_restores_and_reshards_a_sharded_optimizer(loss_scale):
    # In one process: commit keeps the whole state, restore returns to it, and sync lays
    # it out again (reshard) and loads it; the steps after it equal an unbroken run's.
    def build():
        inner = keras.optimizers.Adam(0.01)
        opt = keras.optimizers.LossScaleOptimizer(inner) if loss_scale else inner
        return _fit(hk.DistributedOptimizer(opt, sharded=True), epochs=1)

    model = build()
    opt = model.optimizer
    state = hk.elastic.KerasState(model, epoch=0)
    committed = opt.gather_state(root_rank=None)
    weights = numpy_values(model.weights)
    x, y = _data(seed=3)
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    state.epoch = 1
    state.restore()
    assert state.epoch == 0
    for a, b in zip(numpy_values(model.weights), weights):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(opt.gather_state(root_rank=None), committed):
        np.testing.assert_array_equal(a, b)
    slots_before = [id(v) for v in opt.variables]
    state.on_reset()
    state.sync()                                    # re-shards (same size here)
    assert [id(v) for v in opt.variables] != slots_before   # the slots were made anew
    for a, b in zip(opt.gather_state(root_rank=None), committed):
        np.testing.assert_array_equal(a, b)
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    unbroken = build()
    unbroken.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(numpy_values(model.weights), numpy_values(unbroken.weights)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    for a, b in zip(opt.gather_state(root_rank=None),
                    unbroken.optimizer.gather_state(root_rank=None)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_sharded_load_state_names_what_differs():
    model = _fit(hk.DistributedOptimizer(keras.optimizers.SGD(0.1, momentum=0.9),
                                         sharded=True), epochs=1)
    opt = model.optimizer
    values = opt.gather_state(root_rank=None)
    with pytest.raises(ShardingError, match=r"it holds 5 optimizer variables, but a SGD "
                                            r"built on these 4 trainable variables has 6"):
        opt.load_state(values[:5])
    with pytest.raises(ShardingError, match=r"rank 0 has 5 optimizer variables, but a SGD "
                                            r"built on these 4 trainable variables has 6"):
        opt.load_state(values[:5], root_rank=0)
    fresh = hk.DistributedOptimizer(keras.optimizers.SGD(0.1), sharded=True)
    with pytest.raises(ShardingError, match=r"reshard\(\): the optimizer is not built yet"):
        fresh.reshard()

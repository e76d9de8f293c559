"""tf_hvd.keras in one process (size 1): the DistributedOptimizer wrapper,
load_model, the callbacks and the value collectives. The multi-process
behaviour is tested in tests/parallel/test_training.py."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from one_process import initialized  # noqa: F401 (hvd.init() once, autouse)
from one_process import numpy_values, regression_data, small_model

import tf_hvd as hvd
import tf_hvd.keras as hk


OPTIMIZERS = [
    lambda: keras.optimizers.SGD(0.05, momentum=0.9, nesterov=True),
    lambda: keras.optimizers.Adam(0.01, amsgrad=True),
    lambda: keras.optimizers.RMSprop(0.01, momentum=0.5),
    lambda: keras.optimizers.AdamW(0.01, weight_decay=0.01),
    lambda: keras.optimizers.Adagrad(0.05),
    lambda: keras.optimizers.Nadam(0.01),
]


@pytest.mark.parametrize("make", OPTIMIZERS)
def test_wrapper_is_the_optimizer_class_with_the_same_config(make):
    opt = make()
    dopt = hk.DistributedOptimizer(opt, backward_passes_per_step=3,
                                   compression=hvd.Compression.fp16)
    assert isinstance(dopt, type(opt)) and type(dopt) is not type(opt)
    assert type(dopt).__name__ == type(opt).__name__
    assert hk.is_distributed_optimizer(dopt) and not hk.is_distributed_optimizer(opt)
    assert dopt.get_config() == opt.get_config()
    # from_config round trip keeps the config and the Horovod settings.
    again = type(dopt).from_config(dopt.get_config())
    assert type(again) is type(dopt)
    assert again.get_config() == dopt.get_config()
    assert again._hvd.params.backward_passes_per_step == 3
    assert again._hvd.params.compression is hvd.Compression.fp16
    # The variables are the original's: iterations and learning rate only.
    assert [v.name for v in dopt.variables] == [v.name for v in opt.variables]


@pytest.mark.parametrize("make", OPTIMIZERS[:3])
def test_same_as_plain_optimizer_in_one_process(make):
    x, y = regression_data()
    results = []
    for wrap in (False, True):
        model = small_model()
        opt = make()
        model.compile(optimizer=hk.DistributedOptimizer(opt) if wrap else opt, loss="mse")
        model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
        results.append(numpy_values(model.weights) + numpy_values(model.optimizer.variables))
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_state_of_a_built_optimizer_is_copied():
    x, y = regression_data()
    model = small_model()
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    plain = model.optimizer
    dopt = hk.DistributedOptimizer(plain)
    assert dopt.built and int(dopt.iterations) == int(plain.iterations) == 4
    for a, b in zip(numpy_values(dopt.variables), numpy_values(plain.variables)):
        np.testing.assert_array_equal(a, b)
    # A step of either from the same weights gives the same result.
    start = numpy_values(model.weights)
    grads = [tf.ones_like(v) * 0.1 for v in model.trainable_variables]
    plain.apply_gradients(zip(grads, model.trainable_variables))
    after_plain = numpy_values(model.weights)
    for v, value in zip(model.weights, start):
        v.assign(value)
    dopt.apply_gradients(zip(grads, model.trainable_variables))
    for a, b in zip(numpy_values(model.weights), after_plain):
        np.testing.assert_array_equal(a, b)


def test_learning_rate_schedule_and_lr_updates():
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.5)
    dopt = hk.DistributedOptimizer(keras.optimizers.SGD(schedule))
    assert dopt._learning_rate is schedule
    dopt = hk.DistributedOptimizer(keras.optimizers.SGD(0.1))
    dopt.learning_rate = 0.25
    assert float(dopt.learning_rate) == pytest.approx(0.25)


def test_errors():
    with pytest.raises(TypeError, match="Keras optimizer"):
        hvd.DistributedOptimizer(object())
    with pytest.raises(TypeError):
        hk.DistributedOptimizer(tf.compat.v1.train.AdamOptimizer(0.1))
    dopt = hk.DistributedOptimizer(keras.optimizers.SGD(0.1))
    with pytest.raises(ValueError, match="already"):
        hk.DistributedOptimizer(dopt)
    with pytest.raises(ValueError, match="predivide"):
        hk.DistributedOptimizer(keras.optimizers.SGD(0.1), op=hvd.Sum,
                                gradient_predivide_factor=2.0)
    with pytest.raises(ValueError, match="either"):
        hk.DistributedOptimizer(keras.optimizers.SGD(0.1), num_groups=2, groups=2)


def test_tf_hvd_factory_returns_the_keras_wrapper():
    dopt = hvd.DistributedOptimizer(keras.optimizers.Adam(0.1))
    assert hk.is_distributed_optimizer(dopt)
    assert isinstance(dopt, keras.optimizers.Adam)


@pytest.mark.parametrize("name", ["sgd", "adam"])
def test_backward_passes_per_step_equals_the_bigger_batch(name):
    make = {"sgd": lambda: keras.optimizers.SGD(0.05),
            "adam": lambda: keras.optimizers.Adam(0.01)}[name]
    x, y = regression_data(48)
    model = small_model()
    dopt = hk.DistributedOptimizer(make(), backward_passes_per_step=2,
                                   average_aggregated_gradients=True)
    model.compile(optimizer=dopt, loss="mse")
    model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    ref = small_model()
    ref.compile(optimizer=make(), loss="mse")
    ref.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(numpy_values(model.weights), numpy_values(ref.weights)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert int(dopt.iterations) == 6 == int(ref.optimizer.iterations)


def test_backward_passes_per_step_sums_without_averaging():
    x, y = regression_data(24)
    model = small_model()
    model.compile(optimizer=hk.DistributedOptimizer(
        keras.optimizers.SGD(0.05), backward_passes_per_step=3), loss="mse")
    model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    ref = small_model()   # the sum of 3 mean gradients == 3 x the mean over 12 samples
    ref.compile(optimizer=keras.optimizers.SGD(0.15), loss="mse")
    ref.fit(x, y, batch_size=12, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(numpy_values(model.weights), numpy_values(ref.weights)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_backward_passes_per_step_direct_apply_gradients_eager_and_function():
    for in_function in (False, True):
        var = keras.Variable(np.zeros(3, np.float32))
        dopt = hk.DistributedOptimizer(keras.optimizers.SGD(1.0),
                                       backward_passes_per_step=2,
                                       average_aggregated_gradients=True)

        def step(g):
            dopt.apply_gradients([(g, var)])
        if in_function:
            step = tf.function(step)
        seen = []
        for g in ([1.0, 2.0, 3.0], [3.0, 2.0, 1.0], [1.0, 1.0, 1.0]):
            step(tf.constant(g))
            seen.append(numpy_values([var])[0].copy())
        np.testing.assert_allclose(seen[0], [0, 0, 0])
        np.testing.assert_allclose(seen[1], [-2, -2, -2])
        np.testing.assert_allclose(seen[2], [-2, -2, -2])
        assert int(dopt.iterations) == 1


def test_none_gradients_pass_through():
    a = keras.Variable(np.ones(2, np.float32))
    b = keras.Variable(np.ones(2, np.float32))
    dopt = hk.DistributedOptimizer(keras.optimizers.SGD(0.5))
    with pytest.warns(UserWarning):
        dopt.apply_gradients([(tf.ones(2), a), (None, b)])
    np.testing.assert_allclose(numpy_values([a, b]), [[0.5, 0.5], [1, 1]])


def test_save_and_load_model(tmp_path):
    x, y = regression_data()
    model = small_model()
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.Adam(0.01)),
                  loss="mse")
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    path = str(tmp_path / "model.keras")
    model.save(path)
    plain = keras.models.load_model(path)
    assert type(plain.optimizer) is keras.optimizers.Adam
    loaded = hk.load_model(path, compression=hvd.Compression.fp16)
    assert hk.is_distributed_optimizer(loaded.optimizer)
    assert isinstance(loaded.optimizer, keras.optimizers.Adam)
    assert loaded.optimizer._hvd.params.compression is hvd.Compression.fp16
    assert int(loaded.optimizer.iterations) == 4
    for a, b in zip(numpy_values(loaded.optimizer.variables),
                    numpy_values(model.optimizer.variables)):
        np.testing.assert_array_equal(a, b)
    loaded.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    assert int(loaded.optimizer.iterations) == 8


def test_load_model_with_custom_optimizer(tmp_path):
    @keras.saving.register_keras_serializable(package="tf_hvd_test")
    class MySGD(keras.optimizers.SGD):
        pass

    model = small_model()
    model.compile(optimizer=MySGD(0.1), loss="mse")
    path = str(tmp_path / "custom.keras")
    model.save(path)
    loaded = hk.load_model(path, custom_optimizers=[MySGD])
    assert isinstance(loaded.optimizer, MySGD)
    assert hk.is_distributed_optimizer(loaded.optimizer)


# ---------------------------------------------------------------------------
# Callbacks


class _LrLog(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.seen = []

    def on_train_batch_begin(self, batch, logs=None):
        self.seen.append(float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)))


def test_warmup_is_constant_in_one_process():
    x, y = regression_data(16)
    model = small_model()
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.2)), loss="mse")
    log = _LrLog()
    hist = model.fit(x, y, batch_size=4, epochs=2, verbose=0, callbacks=[
        hk.callbacks.LearningRateWarmupCallback(0.2, warmup_epochs=2), log])
    np.testing.assert_allclose(log.seen, [0.2] * 8, rtol=1e-6)
    np.testing.assert_allclose(hist.history["learning_rate"], [0.2, 0.2], rtol=1e-6)


def test_schedule_constant_multiplier_is_staircase():
    x, y = regression_data(16)
    model = small_model()
    model.compile(optimizer=keras.optimizers.SGD(0.3), loss="mse")
    log = _LrLog()
    model.fit(x, y, batch_size=8, epochs=3, verbose=0, callbacks=[
        hk.callbacks.LearningRateScheduleCallback(0.2, 0.5, start_epoch=1, end_epoch=2), log])
    np.testing.assert_allclose(log.seen, [0.3, 0.3, 0.1, 0.1, 0.1, 0.1], rtol=1e-6)


@pytest.mark.parametrize("correction", [True, False])
def test_momentum_correction_scales_the_velocity(correction):
    model = small_model()
    opt = keras.optimizers.SGD(0.1, momentum=0.9)
    model.compile(optimizer=opt, loss="mse")
    opt.build(model.trainable_variables)
    for m in opt.momentums:
        m.assign(np.ones(m.shape, np.float32))
    cb = hk.callbacks.LearningRateScheduleCallback(0.1, 0.5, momentum_correction=correction)
    cb.set_model(model)
    cb._adjust_learning_rate(0)
    assert float(opt.learning_rate) == pytest.approx(0.05)
    expected = 0.5 if correction else 1.0
    for m in opt.momentums:
        np.testing.assert_allclose(numpy_values([m])[0], expected)


def test_metric_average_and_broadcast_in_one_process():
    x, y = regression_data(16)
    model = small_model()
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.Adam(0.01)),
                  loss="mse", metrics=["mae"])
    bcast = hk.callbacks.BroadcastGlobalVariablesCallback(0)
    hist = model.fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[
        bcast, hk.callbacks.MetricAverageCallback()])
    assert bcast.broadcast_done
    assert set(hist.history) == {"loss", "mae"}
    logs = {"loss": 1.5, "name": "text"}
    hk.callbacks.MetricAverageCallback()._average_in_place(logs)
    assert logs == {"loss": 1.5, "name": "text"}


def test_best_model_checkpoint(tmp_path):
    x, y = regression_data(16)
    model = small_model()
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.01)), loss="mse")
    # Horovod's signature: filepath may come later, save_weights_only is third.
    unset = hk.callbacks.BestModelCheckpoint("loss", 0, False)
    assert unset.filepath is None and unset.save_best_only
    with pytest.raises(ValueError, match="filepath"):
        model.fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[unset])
    path = tmp_path / "best.keras"
    cb = hk.callbacks.BestModelCheckpoint(monitor="loss", filepath=str(path))
    model.fit(x, y, batch_size=4, epochs=2, verbose=0, callbacks=[cb])
    assert path.exists()
    late = hk.callbacks.BestModelCheckpoint(monitor="loss", save_weights_only=True)
    late.filepath = str(tmp_path / "best.weights.h5")
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[late])
    assert (tmp_path / "best.weights.h5").exists()


# ---------------------------------------------------------------------------
# Functions on values and variables


def test_value_collectives_in_one_process():
    np.testing.assert_allclose(hk.allreduce(np.array([1.0, 2.0], np.float32)), [1, 2])
    np.testing.assert_allclose(hk.allreduce(3.0, op=hvd.Sum), 3.0)
    np.testing.assert_allclose(hk.allgather(np.ones((2, 3), np.float32)), np.ones((2, 3)))
    np.testing.assert_allclose(hk.broadcast(np.arange(3), root_rank=0), np.arange(3))
    np.testing.assert_allclose(hk.allreduce(keras.Variable(np.ones(2, np.float32))), [1, 1])


def test_broadcast_global_variables_needs_a_model_eagerly():
    with pytest.raises(RuntimeError, match="Keras 3 has no global variables: call "
                                           r"broadcast_global_variables\(root_rank, model=model\)"):
        hk.broadcast_global_variables(0)
    model = small_model()
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    hk.broadcast_global_variables(0, model=model)


def test_keras_module_exports():
    for name in ["init", "shutdown", "size", "rank", "local_size", "local_rank",
                 "cross_size", "cross_rank", "Compression", "Average", "Sum",
                 "DistributedOptimizer", "broadcast_global_variables", "allreduce",
                 "allgather", "broadcast", "load_model", "callbacks",
                 "PartialDistributedOptimizer", "SyncBatchNormalization",
                 "start_timeline", "stop_timeline", "mpi_threads_supported",
                 "ddl_built", "ccl_built", "rocm_built", "cuda_built",
                 "is_initialized", "reducescatter"]:
        assert hasattr(hk, name), name
    assert hk.SyncBatchNormalization is hvd.SyncBatchNormalization
    assert issubclass(hk.SyncBatchNormalization, keras.layers.BatchNormalization)
    # Horovod's positional order of DistributedOptimizer's parameters.
    import inspect
    params = list(inspect.signature(hk.DistributedOptimizer).parameters)
    assert params == ["optimizer", "name", "device_dense", "device_sparse",
                      "compression", "sparse_as_dense",
                      "gradient_predivide_factor", "op",
                      "backward_passes_per_step",
                      "average_aggregated_gradients", "num_groups", "groups",
                      "process_set", "scale_local_gradients", "sharded"]
    # horovod.keras' order (Horovod 0.28.1 defines it there only), then tf_hvd's two.
    params = list(inspect.signature(hk.PartialDistributedOptimizer).parameters)
    assert params == ["optimizer", "name", "device_dense", "device_sparse",
                      "compression", "sparse_as_dense",
                      "gradient_predivide_factor", "op", "groups", "process_set",
                      "local_layers", "scale_local_gradients",
                      "backward_passes_per_step", "average_aggregated_gradients"]
    params = list(inspect.signature(hk.load_model).parameters)
    assert params == ["filepath", "custom_optimizers", "custom_objects",
                      "compression", "legacy_opts", "sharded"]
    with pytest.raises(ValueError, match="tf-keras"):
        hk.load_model("unused.keras", legacy_opts=True)
    for name in ["BroadcastGlobalVariablesCallback", "MetricAverageCallback",
                 "LearningRateWarmupCallback", "LearningRateScheduleCallback",
                 "BestModelCheckpoint"]:
        assert hasattr(hk.callbacks, name), name


def test_loss_scale_optimizer_is_reduced_once(tmp_path):
    x, y = regression_data(16)
    model = small_model()
    opt = hk.DistributedOptimizer(
        keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam(0.01)))
    assert isinstance(opt, keras.optimizers.LossScaleOptimizer)
    assert not hk.is_distributed_optimizer(opt.inner_optimizer)
    model.compile(optimizer=opt, loss="mse")
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    path = str(tmp_path / "lso.keras")
    model.save(path)
    loaded = hk.load_model(path)
    assert hk.is_distributed_optimizer(loaded.optimizer)
    assert not hk.is_distributed_optimizer(loaded.optimizer.inner_optimizer)
    loaded.fit(x, y, batch_size=8, epochs=1, verbose=0)


def test_sync_batch_norm_takes_keras2_fused_argument():
    """Keras 2's ``fused``: False is accepted and ignored; True/None raise as in Horovod."""
    x = np.arange(24, dtype=np.float32).reshape(4, 6) / 7.0
    synced = hk.SyncBatchNormalization(fused=False)
    plain = keras.layers.BatchNormalization()
    np.testing.assert_allclose(synced(x, training=True), plain(x, training=True), rtol=1e-5)
    assert "fused" not in synced.get_config()
    for fused in (True, None):
        with pytest.raises(ValueError, match=r"does not support fused=True \(nor fused=None\)"):
            hk.SyncBatchNormalization(fused=fused)


def test_best_model_checkpoint_takes_either_horovod_order():
    # horovod.tensorflow.keras: (monitor, verbose, save_weights_only, mode, save_freq)
    cb = hk.callbacks.BestModelCheckpoint("val_acc", 1, True, "min", 4)
    assert (cb.monitor, cb.verbose, cb.save_weights_only, cb.mode, cb.save_freq) == (
        "val_acc", 1, True, "min", 4)
    # horovod.keras: (monitor, verbose, mode, save_freq)
    cb = hk.callbacks.BestModelCheckpoint("val_acc", 1, "max", 3)
    assert (cb.monitor, cb.verbose, cb.save_weights_only, cb.mode, cb.save_freq) == (
        "val_acc", 1, False, "max", 3)
    cb = hk.callbacks.BestModelCheckpoint("loss", 0, "min")
    assert (cb.save_weights_only, cb.mode, cb.save_freq) == (False, "min", "epoch")

"""Keras callbacks for data-parallel training with tf_hvd.

The classes derive from ``tf.keras``' Callback (Keras 3, or tf-keras 2 with
``TF_USE_LEGACY_KERAS=1``) and also work in the other Keras' ``model.fit``;
they read and set optimizer state of either Keras' optimizers.

Put ``MetricAverageCallback`` before callbacks that read epoch metrics
(checkpointing, early stopping, learning-rate reduction) so they see the
averages. Keras inserts its progress bar first, so the numbers it prints are
the local ones of the printing rank; ``History`` (added last) records the
averages.
"""

import numpy as np
import tensorflow as tf

from tf_hvd import functions as _functions
from tf_hvd import ops as _ops
from tf_hvd import topology
from tf_hvd._keras import flavors
from tf_hvd._keras.state import var_key as _var_key
from tf_hvd.keras.backup_and_restore import BackupAndRestore  # noqa: F401 (hvd.callbacks.*)
from tf_hvd.keras.callback_base import CallbackBase as _CallbackBase
from tf_hvd.reduce_ops import Average

_keras = flavors.default_keras()
_IS_TF_KERAS = flavors.is_tf_keras(_keras.callbacks.Callback)


def _value(x):
    if hasattr(x, "numpy"):
        return float(np.asarray(x.numpy()))
    return float(x)


def _get_lr(optimizer):
    try:
        return _value(optimizer.learning_rate)
    except (TypeError, ValueError):
        raise ValueError("the optimizer's learning rate is a schedule or a "
                         "callable; learning-rate callbacks need a float "
                         "learning rate")


def _set_lr(optimizer, value):
    kind = flavors.optimizer_kind(optimizer)
    if kind == flavors.KERAS3:
        import keras
        lr = getattr(optimizer, "_learning_rate", None)
        ok = isinstance(lr, keras.Variable)
    elif kind == flavors.TF_KERAS:
        ok = isinstance(getattr(optimizer, "_learning_rate", None), tf.Variable)
    else:
        lr = optimizer._hyper.get("learning_rate")
        ok = not callable(lr) or isinstance(lr, tf.Variable)
    if not ok:
        raise ValueError("the optimizer's learning rate is a schedule or a "
                         "callable; learning-rate callbacks need a float "
                         "learning rate")
    if kind == flavors.KERAS3:
        optimizer._learning_rate.assign(value)
    else:
        optimizer.learning_rate = value


def _momentum_buffers(optimizer):
    """The velocity variables that a momentum correction scales."""
    try:
        momentum = _value(getattr(optimizer, "momentum", 0.0))
    except (TypeError, ValueError):
        return []
    if not momentum:
        return []
    if flavors.optimizer_kind(optimizer) == flavors.TF_KERAS_LEGACY:
        return [slots["momentum"] for slots in optimizer._slots.values()
                if "momentum" in slots]
    for attr in ("momentums", "_momentums"):
        buffers = getattr(optimizer, attr, None)
        if buffers:
            return list(buffers)
    return []


def _read(variable):
    # Keras 3 variables have a ``value`` property, tf.Variables a method.
    value = getattr(variable, "value", variable)
    return tf.convert_to_tensor(value() if callable(value) else value)


class BroadcastGlobalVariablesCallback(_CallbackBase):
    """Broadcast the model's and the optimizer's variables from ``root_rank``
    after the first training batch (so the optimizer's state exists), making
    every rank continue from the same state.

    Args:
      root_rank: the rank whose variables everyone takes.
      device: device for the broadcasts ('' = default).
      local_variables: variables (or one variable) that keep each rank's own
        value (e.g. the weights of a model-parallel part).
      process_set: only this hvd.ProcessSet's ranks take part (default: all).

    Example:

    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)),
    ...               loss="mse")
    >>> callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0)]
    >>> history = model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=1, verbose=0,
    ...                     callbacks=callbacks)
    >>> len(history.history["loss"])
    1
    """

    def __init__(self, root_rank, device='', local_variables=None, process_set=None):
        super(BroadcastGlobalVariablesCallback, self).__init__()
        self.root_rank = root_rank
        self.device = device
        self.process_set = process_set
        if local_variables is None:
            local_variables = []
        elif not isinstance(local_variables, (list, tuple, set)):
            local_variables = [local_variables]
        self.local_variables = list(local_variables)
        self.broadcast_done = False

    def on_train_batch_end(self, batch, logs=None):
        if self.broadcast_done:
            return
        local = set(_var_key(v) for v in self.local_variables)
        variables = [v for v in flavors.model_and_optimizer_variables(self.model)
                     if _var_key(v) not in local]
        with tf.device(self.device):
            _functions.broadcast_variables(variables, self.root_rank,
                                           process_set=self.process_set)
        self.broadcast_done = True


class MetricAverageCallback(_CallbackBase):
    """Replace the epoch-end metrics in ``logs`` by their average over ranks.

    Must come before callbacks that read the metrics. Every rank must produce
    the same metric names. With ``process_set``, the average over its ranks.

    Example:

    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse", metrics=["mae"])
    >>> history = model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=1, verbose=0,
    ...                     callbacks=[hvd.callbacks.MetricAverageCallback()])
    >>> sorted(history.history)          # each the average over the ranks
    ['loss', 'mae']
    """

    def __init__(self, device='', process_set=None):
        super(MetricAverageCallback, self).__init__()
        self.device = device
        self.process_set = process_set

    def _average_in_place(self, logs):
        ps = self.process_set
        members = topology.size() if ps is None or ps.process_set_id == 0 else ps.size()
        if not logs or members == 1:
            return
        names = sorted(k for k, v in logs.items() if _is_number(v))
        if not names:
            return
        values = tf.constant([float(logs[k]) for k in names], dtype=tf.float64)
        with tf.device(self.device):
            averaged = _ops.allreduce(values, op=Average,
                                      name="MetricAverageCallback", process_set=ps)
        averaged = averaged.numpy()
        for k, v in zip(names, averaged):
            logs[k] = float(v)

    def on_epoch_end(self, epoch, logs=None):
        self._average_in_place(logs)


def _is_number(value):
    if isinstance(value, (bool, np.bool_)):
        return False
    if isinstance(value, (int, float, np.integer, np.floating)):
        return True
    if isinstance(value, (np.ndarray, tf.Tensor)) and np.ndim(value) == 0:
        return True
    return False


class LearningRateScheduleCallback(_CallbackBase):
    """Set the learning rate to ``initial_lr * multiplier`` between epochs
    ``start_epoch`` (inclusive) and ``end_epoch`` (exclusive).

    Args:
      initial_lr: the base learning rate (usually already scaled by size).
      multiplier: a constant, or a function of the epoch number (a float
        when ``staircase=False``: epoch + batch / steps_per_epoch).
      start_epoch, end_epoch: the epochs the schedule covers.
      staircase: change once per epoch (at its first batch) rather than on
        every batch.
      momentum_correction: when the learning rate changes from ``old`` to
        ``new``, scale the optimizer's momentum buffers by ``new / old``
        (Goyal et al. 2017). Keras 3 bakes the ``momentum`` hyperparameter
        into the traced step, so the correction is applied to the velocity
        variables, which is the same update for SGD and RMSprop momentum.
      steps_per_epoch: batches per epoch (taken from ``fit`` if not given;
        needed when ``staircase=False``).

    Example:

    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    >>> halve = hvd.callbacks.LearningRateScheduleCallback(
    ...     initial_lr=0.1, multiplier=0.5, start_epoch=1)
    >>> _ = model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=2, verbose=0,
    ...               callbacks=[halve])
    >>> round(float(model.optimizer.learning_rate), 6)   # epoch 1 on: 0.1 * 0.5
    0.05
    """

    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None,
                 staircase=True, momentum_correction=True, steps_per_epoch=None,
                 verbose=0):
        super(LearningRateScheduleCallback, self).__init__()
        self.initial_lr = initial_lr
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.momentum_correction = momentum_correction
        self.steps_per_epoch = steps_per_epoch
        self.verbose = verbose
        self.current_epoch = None
        if not callable(multiplier):
            self.staircase = True
            constant = multiplier
            self.multiplier = lambda epoch: constant
        else:
            self.multiplier = multiplier

    def _autodetect_steps_per_epoch(self):
        params = self.params or {}
        if params.get("steps"):
            return params["steps"]
        if params.get("samples") and params.get("batch_size"):
            return int(np.ceil(params["samples"] / params["batch_size"]))
        raise ValueError("could not find the number of steps per epoch; pass "
                         "steps_per_epoch")

    def _adjust_learning_rate(self, epoch):
        opt = self.model.optimizer
        old_lr = _get_lr(opt)
        new_lr = self.initial_lr * self.multiplier(epoch)
        _set_lr(opt, new_lr)
        if self.momentum_correction and old_lr > 0 and new_lr != old_lr:
            ratio = new_lr / old_lr
            for buf in _momentum_buffers(opt):
                buf.assign(_read(buf) * ratio)

    def in_range(self, epoch):
        if epoch < self.start_epoch:
            return False
        return self.end_epoch is None or epoch < self.end_epoch

    def on_train_begin(self, logs=None):
        if self.initial_lr is None:
            self.initial_lr = _get_lr(self.model.optimizer)
        if not self.staircase and not self.steps_per_epoch:
            self.steps_per_epoch = self._autodetect_steps_per_epoch()

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if self.current_epoch is None or not self.in_range(self.current_epoch):
            return
        if self.staircase:
            if batch == 0:
                self._adjust_learning_rate(self.current_epoch)
        else:
            self._adjust_learning_rate(
                self.current_epoch + float(batch) / self.steps_per_epoch)

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["learning_rate"] = _get_lr(self.model.optimizer)


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Ramp the learning rate from ``initial_lr / size`` to ``initial_lr`` over
    ``warmup_epochs`` epochs, batch by batch (Goyal et al. 2017).

    ``initial_lr`` is the scaled rate (e.g. ``0.1 * hvd.size()``). At fractional
    epoch e (epoch + batch/steps_per_epoch) the rate is
    ``initial_lr / size * (1 + e' * (size - 1) / warmup_epochs)`` with
    ``e' = e + 1 / steps_per_epoch``, so the last batch of the warmup uses
    ``initial_lr`` exactly.

    Example:

    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    >>> warmup = hvd.callbacks.LearningRateWarmupCallback(
    ...     initial_lr=0.1 * hvd.size(), warmup_epochs=1)
    >>> _ = model.fit(np.ones((4, 2)), np.ones((4, 1)), batch_size=2, epochs=2,
    ...               verbose=0, callbacks=[warmup])
    >>> round(float(model.optimizer.learning_rate), 6)   # 0.1 * size after the warmup
    0.1
    """

    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True,
                 steps_per_epoch=None, verbose=0):
        self.warmup_epochs = warmup_epochs

        def multiplier(epoch):
            epoch = epoch + 1.0 / self.steps_per_epoch
            n = topology.size()
            return 1.0 / n * (epoch * (n - 1) / warmup_epochs + 1)

        super(LearningRateWarmupCallback, self).__init__(
            initial_lr, multiplier, start_epoch=0, end_epoch=warmup_epochs,
            staircase=False, momentum_correction=momentum_correction,
            steps_per_epoch=steps_per_epoch, verbose=verbose)

    def on_epoch_end(self, epoch, logs=None):
        super(LearningRateWarmupCallback, self).on_epoch_end(epoch, logs)
        if epoch == self.end_epoch - 1 and self.verbose > 0 and topology.rank() == 0:
            print("\nEpoch %d: finished gradual learning rate warmup to %g."
                  % (epoch + 1, _get_lr(self.model.optimizer)))


class BestModelCheckpoint(_keras.callbacks.ModelCheckpoint):
    """Keep the best model seen so far (by ``monitor``), saved by rank 0 only.

    Horovod's arguments in ``horovod.tensorflow.keras``' order, plus
    ``filepath``; ``horovod.keras``' order (monitor, verbose, mode, save_freq),
    which has no save_weights_only, is recognised by the mode (a string) in
    third place. As in Horovod the file path may be set later
    (``cb.filepath = ...``, as Horovod's Spark estimator does) but must be set
    when training starts; Keras 3 wants a
    ``.keras`` file (``.weights.h5`` with ``save_weights_only=True``). Put
    ``MetricAverageCallback`` before it so the decision uses the averages.

    Example:

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "best.keras")
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> best = hvd.callbacks.BestModelCheckpoint(monitor="loss", filepath=path)
    >>> _ = model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=2, verbose=0,
    ...               callbacks=[hvd.callbacks.MetricAverageCallback(), best])
    >>> os.path.exists(path)             # written by rank 0
    True
    """

    def __init__(self, monitor='val_loss', verbose=0, save_weights_only=False,
                 mode='auto', save_freq='epoch', filepath=None):
        if isinstance(save_weights_only, str):
            # horovod.keras' positions: (monitor, verbose, mode, save_freq).
            save_weights_only, mode, save_freq = (
                False, save_weights_only, save_freq if mode == 'auto' else mode)
        placeholder = ("unset.weights.h5" if save_weights_only else "unset.keras")
        super(BestModelCheckpoint, self).__init__(
            filepath=placeholder if filepath is None else filepath,
            monitor=monitor, verbose=verbose, save_best_only=True,
            save_weights_only=save_weights_only, mode=mode,
            save_freq=save_freq)
        if filepath is None:
            self.filepath = None

    def on_train_begin(self, logs=None):
        if self.filepath is None:
            raise ValueError("BestModelCheckpoint has no filepath: pass "
                             "filepath= or set .filepath before training")
        if not _IS_TF_KERAS:
            # Keras 3 checks the extension only in its constructor.
            _keras.callbacks.ModelCheckpoint(
                str(self.filepath), save_weights_only=self.save_weights_only)
        parent = getattr(super(BestModelCheckpoint, self), "on_train_begin", None)
        if parent is not None:
            parent(logs)

    def _save_model(self, *args, **kwargs):
        if topology.rank() != 0:
            return
        return super(BestModelCheckpoint, self)._save_model(*args, **kwargs)

"""SyncBatchNormalization: batch normalization over the batch of all ranks.

A subclass of Keras' ``BatchNormalization`` whose training-time batch
statistics are those of the global batch: every rank sums, per channel, its
element count, sum and sum of squares, one allreduce (Sum) adds them up over
the ranks, and mean = sum / count, variance = sum_sq / count - mean^2. So the
output, the moving statistics and (through the allreduce's gradient) the
gradients are those of a ``BatchNormalization`` that saw the concatenated
batches of all ranks. Unlike Horovod's layer (which averages the ranks' means),
ranks may have batches of different sizes. At inference, and with one
process, it is a plain BatchNormalization.

The class is made for ``tf.keras``' Keras (Keras 3, or tf-keras 2 with
``TF_USE_LEGACY_KERAS=1``) on first use; ``sync_batch_norm_class(keras)``
gives the one for a given Keras module.

``fused`` is Keras 2's argument, taken as in Horovod: ``fused=False`` (the
default) is accepted and ignored (Keras 3's BatchNormalization has no fused
kernel, and the synchronized statistics never use one); ``fused=True`` or
``fused=None`` raise ValueError, as in Horovod.

Example:

>>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8),  # doctest: +SKIP
...                           hvd.SyncBatchNormalization(),
...                           keras.layers.Activation("relu")])
>>> tuple(model(np.ones((2, 4), np.float32), training=True).shape)  # doctest: +SKIP
(2, 8)
"""

import tensorflow as tf

from tf_hvd import ops, topology
from tf_hvd._keras import flavors
from tf_hvd.reduce_ops import Sum

_CLASSES = {}


def _global_moments(inputs, axes, weights=None):
    """Mean and variance over ``axes`` (kept as size-1 dims) of every rank's
    ``inputs``, optionally weighted (``weights`` broadcast to ``inputs``)."""
    x = inputs
    if weights is None:
        shape = tf.shape(x)
        count = tf.cast(tf.reduce_prod(tf.gather(shape, axes)), x.dtype)
        total = tf.reduce_sum(x, axes, keepdims=True)
        total_sq = tf.reduce_sum(tf.square(x), axes, keepdims=True)
        count = tf.fill(tf.shape(total), count)
    else:
        w = tf.broadcast_to(tf.cast(weights, x.dtype), tf.shape(x))
        count = tf.reduce_sum(w, axes, keepdims=True)
        total = tf.reduce_sum(w * x, axes, keepdims=True)
        total_sq = tf.reduce_sum(w * tf.square(x), axes, keepdims=True)
    summed = ops.allreduce(tf.stack([count, total, total_sq]), op=Sum)
    count, total, total_sq = tf.unstack(summed)
    count = tf.maximum(count, tf.ones_like(count))
    mean = total / count
    variance = tf.maximum(total_sq / count - tf.square(mean), 0.0)
    return mean, variance


def _check_fused(fused):
    if fused in (True, None):
        raise ValueError("SyncBatchNormalization does not support fused=True "
                         "(nor fused=None); leave fused=False.")


def _make_keras3_class():
    import keras

    @keras.saving.register_keras_serializable(package="tf_hvd")
    class SyncBatchNormalization(keras.layers.BatchNormalization):
        __doc__ = __doc__

        def __init__(self, fused=False, **kwargs):
            _check_fused(fused)
            kwargs.pop("synchronized", None)   # saved configs carry it
            super(SyncBatchNormalization, self).__init__(**kwargs)

        def _moments(self, inputs, mask):
            if topology.size() == 1:
                return super(SyncBatchNormalization, self)._moments(inputs, mask)
            axes = list(self._reduction_axes)
            weights = None
            if mask is not None:
                weights = tf.expand_dims(tf.cast(mask, inputs.dtype), -1)
            mean, variance = _global_moments(inputs, axes, weights)
            return tf.squeeze(mean, axes), tf.squeeze(variance, axes)

    return SyncBatchNormalization


def _make_tf_keras_class(tf_keras):

    @tf_keras.utils.register_keras_serializable(package="tf_hvd")
    class SyncBatchNormalization(tf_keras.layers.BatchNormalization):
        __doc__ = __doc__

        def __init__(self, fused=False, **kwargs):
            _check_fused(fused)
            if not kwargs.get("name"):
                kwargs["name"] = "sync_batch_normalization"
            super(SyncBatchNormalization, self).__init__(fused=False, **kwargs)

        def _moments(self, inputs, reduction_axes, keep_dims, mask=None):
            if topology.size() == 1:
                return super(SyncBatchNormalization, self)._moments(
                    inputs, reduction_axes, keep_dims, mask=mask)
            axes = list(reduction_axes)
            weights = None
            if mask is not None:
                weights = tf.expand_dims(tf.cast(mask, inputs.dtype), -1)
            mean, variance = _global_moments(inputs, axes, weights)
            if not keep_dims:
                mean, variance = tf.squeeze(mean, axes), tf.squeeze(variance, axes)
            return mean, variance

    return SyncBatchNormalization


def sync_batch_norm_class(keras_module=None):
    """The SyncBatchNormalization class for ``keras_module`` (the ``keras``
    or ``tf_keras`` package; default: the one ``tf.keras`` stands for)."""
    if keras_module is None:
        keras_module = flavors.default_keras()
    legacy = flavors.is_tf_keras(keras_module.layers.Layer)
    key = "tf_keras" if legacy else "keras"
    if key not in _CLASSES:
        _CLASSES[key] = (_make_tf_keras_class(keras_module) if legacy
                         else _make_keras3_class())
    return _CLASSES[key]


def __getattr__(name):
    if name == "SyncBatchNormalization":
        return sync_batch_norm_class()
    raise AttributeError("module 'tf_hvd.sync_batch_norm' has no attribute %r"
                         % (name,))

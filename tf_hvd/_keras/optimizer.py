"""The Keras DistributedOptimizer: which wrapper an optimizer gets (Keras 3 in
keras3_optimizer.py, tf-keras 2 in tf_keras_optimizer.py).

``create_distributed_optimizer(opt, ...)`` returns an instance of a class made
on the fly that subclasses ``type(opt)`` (so it *is* an Adam, an SGD, ...), made
from ``opt.get_config()``. For a Keras 3 optimizer its ``apply()`` reduces the
gradients before the wrapped class's ``apply()`` runs (Keras 3's
``apply_gradients`` calls ``apply``, so ``model.fit``, custom ``train_step``s
and direct ``apply_gradients`` calls are all covered). tf-keras optimizers
reduce where Horovod's wrapper does (tf_keras_optimizer.py).

Every variant has ``register_local_var(var)``: that variable's gradient stays
on this rank (divided by the number of ranks with ``scale_local_gradients``,
Horovod's default); ``PartialDistributedOptimizer`` registers whole layers.

Differences from Horovod's tf.keras wrapper, forced by Keras 3:

* the gradients are reduced in ``apply`` (Keras 3 has no ``get_gradients`` /
  ``_compute_gradients`` hook);
* if the given optimizer already has state (it was built), the state is copied
  into the new one, so learning rate, ``iterations`` and slot variables carry
  over;
* ``get_config()`` is the plain optimizer's config (a saved model loads with
  plain Keras as the plain optimizer, and with ``tf_hvd.keras.load_model`` as a
  distributed one); ``type(opt).from_config(opt.get_config())`` gives an
  optimizer with the same Horovod settings;
* with ``backward_passes_per_step > 1`` the optimizer's ``iterations`` counts
  applied updates (not backward passes), so Adam's bias correction and
  learning-rate schedules see the same step numbers as one process running
  the big batch;
* ``model.compile(..., jit_compile=True)`` works: the collectives have XLA
  kernels (docs/xla.md); inside XLA the gradients of one dtype are reduced as
  one grouped allreduce.
"""

from tf_hvd._keras import flavors, keras3_optimizer, tf_keras_optimizer
from tf_hvd._keras.sharding import keras3 as sharded_keras3
from tf_hvd._keras.sharding import tf_keras as sharded_tf_keras


def is_distributed_optimizer(optimizer):
    """Whether ``optimizer`` is a tf_hvd.keras DistributedOptimizer."""
    return bool(getattr(type(optimizer), "_hvd_distributed", False))


def distributed_optimizer_class(base, params, sharded=False):
    """The distributed subclass of a Keras optimizer class, Keras 3 or
    tf-keras, reducing with ``params`` (a ReductionParams; used by
    ``load_model`` to deserialize optimizers as distributed ones); with
    ``sharded`` the sharded-state variant."""
    allreduce_name = params.name or "Distributed%s" % base.__name__
    if sharded:
        if flavors.is_tf_keras(base):
            return sharded_tf_keras.sharded_class(base, params, allreduce_name)
        return sharded_keras3.sharded_class(base, params, allreduce_name)
    if flavors.is_tf_keras(base):
        return tf_keras_optimizer.distributed_class(base, params, allreduce_name)
    return keras3_optimizer.distributed_class(base, params, allreduce_name)


def create_distributed_optimizer(optimizer, params, sharded=False):
    """Return a distributed copy of the Keras optimizer ``optimizer`` (Keras 3,
    tf-keras' optimizers or tf-keras' legacy OptimizerV2 ones), reducing with
    ``params`` (a tf_hvd.reduction_params.ReductionParams); ``sharded``: the
    optimizer state split over the ranks (tf_hvd._keras.sharding)."""
    kind = flavors.optimizer_kind(optimizer)
    if kind is None:
        raise TypeError(
            "expected a Keras optimizer (keras.optimizers.Optimizer, "
            "tf_keras.optimizers.Optimizer or tf_keras.optimizers.legacy."
            "Optimizer), got %s.%s" % (type(optimizer).__module__,
                                      type(optimizer).__name__))
    if is_distributed_optimizer(optimizer):
        raise ValueError("the optimizer is already a DistributedOptimizer")
    if sharded and kind != flavors.KERAS3:
        sharded_tf_keras.check_supported(optimizer)
        cls = distributed_optimizer_class(type(optimizer), params, sharded=True)
        return sharded_tf_keras.create_sharded_optimizer(optimizer, cls)
    if sharded:
        sharded_keras3.check_supported(optimizer)
        cls = distributed_optimizer_class(type(optimizer), params, sharded=True)
        return sharded_keras3.create_sharded_optimizer(optimizer, params, cls)
    cls = distributed_optimizer_class(type(optimizer), params)
    if kind != flavors.KERAS3:
        return tf_keras_optimizer.copy_optimizer(optimizer, cls)
    return keras3_optimizer.copy_optimizer(optimizer, cls)

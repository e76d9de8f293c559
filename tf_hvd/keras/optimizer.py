"""The Keras DistributedOptimizer (Keras 3; tf-keras 2 in tf_keras_optimizer.py).

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

import tensorflow as tf

from tf_hvd import basics
from tf_hvd.allreduce_grads import make_allreduce_grads_fn
from tf_hvd.compression import Compression
from tf_hvd.gradient_aggregation import (LocalGradientAggregationHelper,
                                         LocalGradientAggregationHelperEager)
from tf_hvd.basics import Average
from tf_hvd.keras import flavors


def _var_key(variable):
    """Identity of a variable: a Keras 3 variable is keyed by the tf.Variable
    it holds, so registering either object marks the same weight."""
    inner = getattr(variable, "_value", None)
    if isinstance(inner, tf.Variable):
        return id(inner)
    return id(variable)


def _scale_local(grad, size):
    if grad is None:
        return None
    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(grad.values / tf.cast(size, grad.values.dtype),
                                grad.indices, grad.dense_shape)
    return grad / tf.cast(size, grad.dtype)


class _HvdState(object):
    """Per-instance Horovod state, kept in one plain attribute so that Keras'
    variable tracking does not pick up anything it holds.

    ``compute(grads, variables)`` turns local gradients into the ones to
    apply: gradients of registered local variables stay on this rank (divided
    by the number of ranks when ``scale_local_gradients``, as in Horovod), the
    others are reduced over all ranks, and with ``backward_passes_per_step > 1``
    both are first accumulated locally.
    """

    def __init__(self, params, name):
        self.params = params
        self.global_reduce = make_allreduce_grads_fn(
            name, params["device_dense"], params["device_sparse"],
            params["compression"], params["sparse_as_dense"], params["op"],
            params["gradient_predivide_factor"], params["groups"],
            params.get("process_set"))
        self.local_keys = set()
        self.local_vars = []          # keeps the registered objects alive
        self.agg_helper = None
        if params["backward_passes_per_step"] > 1:
            helper = (LocalGradientAggregationHelperEager if tf.executing_eagerly()
                      else LocalGradientAggregationHelper)
            self.agg_helper = helper(
                params["backward_passes_per_step"], self.reduce,
                sparse_as_dense=params["sparse_as_dense"],
                average_aggregated_gradients=params[
                    "average_aggregated_gradients"],
                name=name + "_aggregation")

    def register_local_var(self, var):
        key = _var_key(var)
        if key not in self.local_keys:
            self.local_keys.add(key)
            self.local_vars.append(var)

    def reduce(self, grads, variables):
        grads = list(grads)
        if not self.local_keys or variables is None:
            return self.global_reduce(grads, variables)
        variables = list(variables)
        is_local = [_var_key(v) in self.local_keys for v in variables]
        shared = [i for i, local in enumerate(is_local) if not local]
        reduced = self.global_reduce([grads[i] for i in shared],
                                     [variables[i] for i in shared])
        out = list(grads)
        for i, g in zip(shared, reduced):
            out[i] = g
        if self.params["scale_local_gradients"]:
            size = basics.size()
            for i, local in enumerate(is_local):
                if local:
                    out[i] = _scale_local(out[i], size)
        return out

    def compute(self, grads, variables):
        if self.agg_helper is None:
            return self.reduce(grads, variables)
        return self.agg_helper.compute_gradients(list(grads), list(variables))


def _register_local_var(self, var):
    """Registers ``var`` as local to this rank: its gradient is not reduced
    over the ranks (and is divided by the number of ranks when the optimizer
    was made with ``scale_local_gradients=True``, Horovod's default)."""
    self._hvd.register_local_var(var)


def _distributed_class(base, params, allreduce_name):
    """A subclass of the optimizer class ``base`` that allreduces in apply()."""

    def __init__(self, *args, **kwargs):
        base.__init__(self, *args, **kwargs)
        self._hvd = _HvdState(params, allreduce_name)
        inner = getattr(self, "inner_optimizer", None)
        if inner is not None and is_distributed_optimizer(inner):
            # A wrapper optimizer (LossScaleOptimizer) deserialized by
            # load_model gets a distributed inner optimizer too: reduce once,
            # here, before the wrapper's own logic (every rank then sees the
            # same gradients, e.g. the same finiteness check).
            inner.__class__ = type(inner)._hvd_base

    def apply(self, grads, trainable_variables=None):
        grads = list(grads)
        if not grads:
            return base.apply(self, grads, trainable_variables)
        if trainable_variables is None:
            if not self.built:
                # Let Keras raise its own error.
                return base.apply(self, grads, trainable_variables)
            variables = list(self._trainable_variables)
        else:
            variables = list(trainable_variables)
            if not self.built:
                import keras
                with keras.name_scope(self.name, caller=self):
                    self.build(variables)
                self.built = True
        state = self._hvd
        reduced = state.compute(grads, variables)
        if state.agg_helper is None:
            return base.apply(self, reduced, variables)
        state.agg_helper.apply_gradients(
            lambda: base.apply(self, reduced, variables), grads=reduced)

    namespace = {
        "__init__": __init__,
        "apply": apply,
        "register_local_var": _register_local_var,
        "__module__": base.__module__,
        "__qualname__": getattr(base, "__qualname__", base.__name__),
        "__doc__": base.__doc__,
        "_hvd_distributed": True,
        "_hvd_params": params,
        "_hvd_base": base,
    }
    return type(base.__name__, (base,), namespace)


def is_distributed_optimizer(optimizer):
    """Whether ``optimizer`` is a tf_hvd.keras DistributedOptimizer."""
    return bool(getattr(type(optimizer), "_hvd_distributed", False))


def _params(device_dense, device_sparse, compression, sparse_as_dense, op,
            gradient_predivide_factor, backward_passes_per_step,
            average_aggregated_gradients, groups, process_set,
            scale_local_gradients):
    from tf_hvd import ops as _ops
    _ops._check_process_set(process_set)
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != "
                         "Average")
    if int(backward_passes_per_step) < 1:
        raise ValueError("backward_passes_per_step must be >= 1, got %r"
                         % (backward_passes_per_step,))
    return dict(device_dense=device_dense, device_sparse=device_sparse,
                compression=compression, sparse_as_dense=sparse_as_dense,
                op=op, gradient_predivide_factor=gradient_predivide_factor,
                backward_passes_per_step=int(backward_passes_per_step),
                average_aggregated_gradients=average_aggregated_gradients,
                groups=groups, process_set=process_set,
                scale_local_gradients=bool(scale_local_gradients))


def distributed_optimizer_class(base, name=None, device_dense='',
                                device_sparse='', compression=Compression.none,
                                sparse_as_dense=False, op=Average,
                                gradient_predivide_factor=1.0,
                                backward_passes_per_step=1,
                                average_aggregated_gradients=False,
                                groups=None, process_set=None,
                                scale_local_gradients=True):
    """The distributed subclass of a Keras optimizer class, Keras 3 or
    tf-keras (used by ``load_model`` to deserialize optimizers as
    distributed ones)."""
    params = _params(device_dense, device_sparse, compression, sparse_as_dense,
                     op, gradient_predivide_factor, backward_passes_per_step,
                     average_aggregated_gradients, groups, process_set,
                     scale_local_gradients)
    allreduce_name = name or "Distributed%s" % base.__name__
    if flavors.is_tf_keras(base):
        from tf_hvd.keras import tf_keras_optimizer
        return tf_keras_optimizer.distributed_class(base, params, allreduce_name)
    return _distributed_class(base, params, allreduce_name)


def create_distributed_optimizer(optimizer, name=None, device_dense='',
                                 device_sparse='',
                                 compression=Compression.none,
                                 sparse_as_dense=False, op=Average,
                                 gradient_predivide_factor=1.0,
                                 backward_passes_per_step=1,
                                 average_aggregated_gradients=False,
                                 groups=None, process_set=None,
                                 scale_local_gradients=True):
    """Return a distributed copy of the Keras optimizer ``optimizer`` (Keras 3,
    tf-keras' optimizers or tf-keras' legacy OptimizerV2 ones)."""
    kind = flavors.optimizer_kind(optimizer)
    if kind is None:
        raise TypeError(
            "expected a Keras optimizer (keras.optimizers.Optimizer, "
            "tf_keras.optimizers.Optimizer or tf_keras.optimizers.legacy."
            "Optimizer), got %s.%s" % (type(optimizer).__module__,
                                      type(optimizer).__name__))
    if is_distributed_optimizer(optimizer):
        raise ValueError("the optimizer is already a DistributedOptimizer")
    cls = distributed_optimizer_class(
        type(optimizer), name=name, device_dense=device_dense,
        device_sparse=device_sparse, compression=compression,
        sparse_as_dense=sparse_as_dense, op=op,
        gradient_predivide_factor=gradient_predivide_factor,
        backward_passes_per_step=backward_passes_per_step,
        average_aggregated_gradients=average_aggregated_gradients,
        groups=groups, process_set=process_set,
        scale_local_gradients=scale_local_gradients)
    if kind != flavors.KERAS3:
        from tf_hvd.keras import tf_keras_optimizer
        return tf_keras_optimizer.copy_optimizer(optimizer, cls)
    import keras
    config = optimizer.get_config()
    lr = getattr(optimizer, "_learning_rate", None)
    if ("learning_rate" in config and lr is not None
            and not isinstance(lr, keras.Variable)):
        # A schedule or a callable: hand the object over as it is.
        config["learning_rate"] = lr
    new = cls.from_config(config)
    if optimizer.built:
        _copy_state(optimizer, new)
    return new


def _copy_state(src, dst):
    """Build ``dst`` on ``src``'s variables and copy every optimizer variable."""
    import keras
    variables = list(src._trainable_variables)
    with keras.name_scope(dst.name, caller=dst):
        dst.build(variables)
    dst.built = True
    src_vars, dst_vars = src.variables, dst.variables
    if len(src_vars) != len(dst_vars):
        raise ValueError("cannot copy the optimizer state: %d variables vs %d"
                         % (len(src_vars), len(dst_vars)))
    for s, d in zip(src_vars, dst_vars):
        d.assign(s.value)

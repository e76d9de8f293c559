"""What every Keras DistributedOptimizer variant carries: its Horovod state.

``HvdState(params, name)`` (params: tf_hvd.reduction_params.ReductionParams)
turns local gradients into the ones to apply; ``distributed_subclass`` makes
the optimizer classes that carry it::

    state = HvdState(params, "DistributedAdam")
    grads = state.compute(grads, variables)
"""

import tensorflow as tf

from tf_hvd import topology
from tf_hvd.gradient_aggregation import (LocalGradientAggregationHelper,
                                         LocalGradientAggregationHelperEager)


def var_key(variable):
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


class HvdState(object):
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
        self.global_reduce = params.allreduce_grads_fn(name)
        self.local_keys = set()
        self.local_vars = []          # keeps the registered objects alive
        self.agg_helper = None
        if params.backward_passes_per_step > 1:
            helper = (LocalGradientAggregationHelperEager if tf.executing_eagerly()
                      else LocalGradientAggregationHelper)
            self.agg_helper = helper(
                params.backward_passes_per_step, self.reduce,
                sparse_as_dense=params.sparse_as_dense,
                average_aggregated_gradients=params.average_aggregated_gradients,
                name=name + "_aggregation")

    def register_local_var(self, var):
        key = var_key(var)
        if key not in self.local_keys:
            self.local_keys.add(key)
            self.local_vars.append(var)

    def reduce(self, grads, variables):
        grads = list(grads)
        if not self.local_keys or variables is None:
            return self.global_reduce(grads, variables)
        variables = list(variables)
        is_local = [var_key(v) in self.local_keys for v in variables]
        shared = [i for i, local in enumerate(is_local) if not local]
        reduced = self.global_reduce([grads[i] for i in shared],
                                     [variables[i] for i in shared])
        out = list(grads)
        for i, g in zip(shared, reduced):
            out[i] = g
        if self.params.scale_local_gradients:
            size = topology.size()
            for i, local in enumerate(is_local):
                if local:
                    out[i] = _scale_local(out[i], size)
        return out

    def compute(self, grads, variables):
        if self.agg_helper is None:
            return self.reduce(grads, variables)
        return self.agg_helper.compute_gradients(list(grads), list(variables))


def register_local_var(self, var):
    """Registers ``var`` as local to this rank: its gradient is not reduced
    over the ranks (and is divided by the number of ranks when the optimizer
    was made with ``scale_local_gradients=True``, Horovod's default)."""
    self._hvd.register_local_var(var)


def build_on_first_apply(optimizer, variables):
    """Build an unbuilt Keras 3 optimizer on ``variables`` in its name scope, as Keras'
    own ``apply`` does, before a distributed ``apply`` reduces anything."""
    if not optimizer.built:
        import keras
        with keras.name_scope(optimizer.name, caller=optimizer):
            optimizer.build(variables)
        optimizer.built = True


def distributed_subclass(base, params, **methods):
    """The distributed subclass of the optimizer class ``base``: ``methods`` (the
    overrides of one Keras flavour) plus ``register_local_var``; same name, module
    and docstring as ``base``, so a saved model names the plain class."""
    namespace = dict(methods)
    namespace.update({
        "register_local_var": register_local_var,
        "__module__": base.__module__,
        "__qualname__": getattr(base, "__qualname__", base.__name__),
        "__doc__": base.__doc__,
        "_hvd_distributed": True,
        "_hvd_params": params,
        "_hvd_base": base,
    })
    return type(base.__name__, (base,), namespace)

"""The DistributedOptimizer for Keras 3 optimizers.

``distributed_class(base, params, name)`` is a subclass of the optimizer class
``base`` whose ``apply()`` reduces the gradients before ``base.apply()`` runs
(Keras 3's ``apply_gradients`` calls ``apply``, so ``model.fit``, custom
``train_step``s and direct ``apply_gradients`` calls are all covered)::

    cls = distributed_class(keras.optimizers.Adam, params, "DistributedAdam")
    opt = copy_optimizer(keras.optimizers.Adam(1e-3), cls)

Keras is imported where it is used: a TensorFlow script that never touches
Keras does not pay for importing it.
"""

from tf_hvd._keras import sharded_rows_update
from tf_hvd._keras.state import HvdState, build_on_first_apply, distributed_subclass


def distributed_class(base, params, allreduce_name):
    """A subclass of the optimizer class ``base`` that allreduces in apply()."""

    def __init__(self, *args, **kwargs):
        base.__init__(self, *args, **kwargs)
        self._hvd = HvdState(params, allreduce_name)
        inner = getattr(self, "inner_optimizer", None)
        if inner is not None and getattr(type(inner), "_hvd_distributed", False):
            # A wrapper optimizer (LossScaleOptimizer) deserialized by
            # load_model gets a distributed inner optimizer too: reduce once,
            # here, before the wrapper's own logic (every rank then sees the
            # same gradients, e.g. the same finiteness check).
            inner.__class__ = type(inner)._hvd_base

    def build(self, variables):
        # The rows of sharded tables (DistributedEmbedding) get their slots from
        # the layer, for this rank's rows only; Keras builds on the others.
        dense = sharded_rows_update.prepare(self, variables)
        return base.build(self, dense)

    def apply(self, grads, trainable_variables=None):
        grads = list(grads)
        if not grads:
            return base.apply(self, grads, trainable_variables)
        if trainable_variables is not None and sharded_rows_update.has_sharded_rows(
                trainable_variables):
            return sharded_rows_update.apply(self, base, grads, list(trainable_variables))
        if trainable_variables is None:
            if not self.built:
                # Let Keras raise its own error.
                return base.apply(self, grads, trainable_variables)
            variables = list(self._trainable_variables)
        else:
            variables = list(trainable_variables)
            build_on_first_apply(self, variables)
        state = self._hvd
        reduced = state.compute(grads, variables)
        if state.agg_helper is None:
            return base.apply(self, reduced, variables)
        state.agg_helper.apply_gradients(
            lambda: base.apply(self, reduced, variables), grads=reduced)

    return distributed_subclass(base, params, __init__=__init__, apply=apply, build=build)


def copy_optimizer(optimizer, cls):
    """A new ``cls`` (a distributed_class) with ``optimizer``'s config and, if
    it was built, its state; a learning-rate schedule or callable is handed
    over as it is."""
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

"""The Keras 3 DistributedOptimizer.

``create_distributed_optimizer(opt, ...)`` returns an instance of a class made
on the fly that subclasses ``type(opt)`` (so it *is* an Adam, an SGD, ...), made
from ``opt.get_config()``, and whose ``apply()`` allreduces the gradients before
the wrapped class's ``apply()`` runs. Keras 3's ``apply_gradients`` calls
``apply``, so ``model.fit``, custom ``train_step``s and direct
``apply_gradients`` calls are all covered.

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
* the Horovod collectives have no XLA kernels: compile models with
  ``jit_compile=False`` on GPUs (Keras picks ``False`` itself on CPU-only
  machines); an XLA-compiled train step stops with an error that says so.
"""

from tf_hvd.allreduce_grads import make_allreduce_grads_fn
from tf_hvd.compression import Compression
from tf_hvd.gradient_aggregation import LocalGradientAggregationHelperEager
from tf_hvd.basics import Average


class _HvdState(object):
    """Per-instance Horovod state, kept in one plain attribute so that Keras'
    variable tracking does not pick up anything it holds."""

    def __init__(self, params, name):
        self.params = params
        self.allreduce_grads = make_allreduce_grads_fn(
            name, params["device_dense"], params["device_sparse"],
            params["compression"], params["sparse_as_dense"], params["op"],
            params["gradient_predivide_factor"], params["groups"],
            params.get("process_set"))
        self.agg_helper = None
        if params["backward_passes_per_step"] > 1:
            self.agg_helper = LocalGradientAggregationHelperEager(
                params["backward_passes_per_step"], self.allreduce_grads,
                sparse_as_dense=params["sparse_as_dense"],
                average_aggregated_gradients=params[
                    "average_aggregated_gradients"],
                name=name + "_aggregation")


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
        if state.agg_helper is None:
            reduced = state.allreduce_grads(grads, variables)
            return base.apply(self, reduced, variables)
        reduced = state.agg_helper.compute_gradients(grads, variables)
        state.agg_helper.apply_gradients(
            lambda: base.apply(self, reduced, variables), grads=reduced)

    namespace = {
        "__init__": __init__,
        "apply": apply,
        "__module__": base.__module__,
        "__qualname__": getattr(base, "__qualname__", base.__name__),
        "__doc__": base.__doc__,
        "_hvd_distributed": True,
        "_hvd_params": params,
        "_hvd_base": base,
    }
    return type(base.__name__, (base,), namespace)


def is_distributed_optimizer(optimizer):
    return bool(getattr(type(optimizer), "_hvd_distributed", False))


def distributed_optimizer_class(base, name=None, device_dense='',
                                device_sparse='', compression=Compression.none,
                                sparse_as_dense=False, op=Average,
                                gradient_predivide_factor=1.0,
                                backward_passes_per_step=1,
                                average_aggregated_gradients=False,
                                groups=None, process_set=None):
    """The distributed subclass of a Keras optimizer class (used by
    ``load_model`` to deserialize optimizers as distributed ones)."""
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != "
                         "Average")
    params = dict(device_dense=device_dense, device_sparse=device_sparse,
                  compression=compression, sparse_as_dense=sparse_as_dense,
                  op=op, gradient_predivide_factor=gradient_predivide_factor,
                  backward_passes_per_step=int(backward_passes_per_step),
                  average_aggregated_gradients=average_aggregated_gradients,
                  groups=groups, process_set=process_set)
    allreduce_name = name or "Distributed%s" % base.__name__
    return _distributed_class(base, params, allreduce_name)


def create_distributed_optimizer(optimizer, name=None, device_dense='',
                                 device_sparse='',
                                 compression=Compression.none,
                                 sparse_as_dense=False, op=Average,
                                 gradient_predivide_factor=1.0,
                                 backward_passes_per_step=1,
                                 average_aggregated_gradients=False,
                                 groups=None, process_set=None):
    """Return a distributed copy of the Keras optimizer ``optimizer``."""
    import keras
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise TypeError("expected a Keras optimizer, got %r" % (type(optimizer),))
    if is_distributed_optimizer(optimizer):
        raise ValueError("the optimizer is already a DistributedOptimizer")
    cls = distributed_optimizer_class(
        type(optimizer), name=name, device_dense=device_dense,
        device_sparse=device_sparse, compression=compression,
        sparse_as_dense=sparse_as_dense, op=op,
        gradient_predivide_factor=gradient_predivide_factor,
        backward_passes_per_step=backward_passes_per_step,
        average_aggregated_gradients=average_aggregated_gradients,
        groups=groups, process_set=process_set)
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

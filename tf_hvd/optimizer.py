"""DistributedOptimizer: wrap an optimizer so that gradients are allreduced.

``DistributedOptimizer(opt, ...)`` is a factory:

* a ``tf.compat.v1.train.Optimizer`` (TF1 graphs, ``opt.minimize(loss)``)
  becomes a ``_DistributedOptimizer`` whose ``compute_gradients`` returns the
  allreduced gradients and whose ``apply_gradients``, ``get_slot``,
  ``variables`` ... are those of the wrapped optimizer;
* a Keras 3 optimizer (``keras.optimizers.Optimizer``) becomes the Keras
  wrapper of ``tf_hvd.keras`` (gradients allreduced inside ``apply``);
* anything else is a ``TypeError``.
"""

import tensorflow as tf

from tf_hvd._keras.flavors import optimizer_kind
from tf_hvd._keras.optimizer import create_distributed_optimizer
from tf_hvd.adasum_optimizer import DistributedAdasumOptimizer
from tf_hvd.compression import Compression
from tf_hvd.gradient_aggregation import LocalGradientAggregationHelper
from tf_hvd.reduce_ops import Adasum, Average
from tf_hvd.reduction_params import ReductionParams
# Re-exported so that ``tf_hvd`` finds every training name here.
from tf_hvd.hooks import BroadcastGlobalVariablesHook
from tf_hvd.tape import (DistributedGradientTape, PartialDistributedGradientTape,
                         reduce_skipping_local, variable_key)

__all__ = ["DistributedOptimizer", "DistributedGradientTape",
           "PartialDistributedGradientTape", "BroadcastGlobalVariablesHook"]

_LegacyOptimizer = tf.compat.v1.train.Optimizer


class _DistributedOptimizer(_LegacyOptimizer):
    """A tf.compat.v1.train.Optimizer that wraps another one and allreduces the
    gradients in ``compute_gradients`` before they are applied.

    With ``backward_passes_per_step > 1`` the gradients are accumulated
    locally and communicated (and applied) once every that many passes; the
    ``global_step`` given to ``apply_gradients`` (if any) still advances on
    every pass, as in Horovod, so it counts backward passes.
    """

    def __init__(self, optimizer, params):
        name = params.name
        if name is None:
            name = "Distributed{}".format(type(optimizer).__name__)
        super(_DistributedOptimizer, self).__init__(
            name=name, use_locking=params.use_locking)
        self._optimizer = optimizer
        self._allreduce_grads = params.allreduce_grads_fn(name)
        self.process_set = params.process_set
        self.scale_local_gradients = params.scale_local_gradients
        self._local_vars = set()
        self._agg_helper = None
        if params.backward_passes_per_step > 1:
            self._agg_helper = LocalGradientAggregationHelper(
                params.backward_passes_per_step, self._allreduce_grads,
                sparse_as_dense=params.sparse_as_dense,
                average_aggregated_gradients=params.average_aggregated_gradients,
                process_set=params.process_set,
                scale_local_gradients=params.scale_local_gradients,
                name=name + "_aggregation")

    def register_local_var(self, var):
        """Marks ``var`` as worker-local (Horovod's model-parallel support): its
        gradient is not allreduced; with ``scale_local_gradients`` (default)
        it is divided by ``hvd.size()`` like the averaged ones::

            opt = hvd.DistributedOptimizer(tf.compat.v1.train.AdamOptimizer())
            opt.register_local_var(embedding)
        """
        if self._agg_helper is not None:
            self._agg_helper.register_local_var(var)
        else:
            self._local_vars.add(variable_key(var))

    def compute_gradients(self, *args, **kwargs):
        """Compute the local gradients with the wrapped optimizer, then
        allreduce them (every ``backward_passes_per_step`` passes when local
        aggregation is on). Returns a list of (gradient, variable) pairs."""
        gradients = self._optimizer.compute_gradients(*args, **kwargs)
        if not gradients:
            return gradients
        grads, variables = zip(*gradients)
        if self._agg_helper is not None:
            reduced = self._agg_helper.compute_gradients(grads, variables)
        elif self._local_vars:
            reduced = reduce_skipping_local(
                self._allreduce_grads, grads, variables,
                [variable_key(v) in self._local_vars for v in variables],
                self.scale_local_gradients)
        else:
            reduced = self._allreduce_grads(grads, variables)
        return list(zip(reduced, variables))

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """Apply with the wrapped optimizer (only on communicating passes when
        local aggregation is on)."""
        if self._agg_helper is None:
            return self._optimizer.apply_gradients(
                grads_and_vars, global_step=global_step, name=name)
        grads_and_vars = list(grads_and_vars)

        def apply_fn():
            return self._optimizer.apply_gradients(
                grads_and_vars, global_step=global_step, name=name)

        skip_fn = None
        if global_step is not None:
            def skip_fn():
                return global_step.assign_add(1)

        ready = self._agg_helper.apply_gradients(
            apply_fn, grads=[g for g, _ in grads_and_vars], skip_fn=skip_fn)
        if tf.executing_eagerly():
            return None
        return ready.op

    # Everything else is the wrapped optimizer's.
    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)

    def _create_slots(self, *args, **kwargs):
        return self._optimizer._create_slots(*args, **kwargs)

    def _prepare(self, *args, **kwargs):
        return self._optimizer._prepare(*args, **kwargs)

    def _apply_dense(self, *args, **kwargs):
        return self._optimizer._apply_dense(*args, **kwargs)

    def _resource_apply_dense(self, *args, **kwargs):
        return self._optimizer._resource_apply_dense(*args, **kwargs)

    def _resource_apply_sparse_duplicate_indices(self, *args, **kwargs):
        return self._optimizer._resource_apply_sparse_duplicate_indices(
            *args, **kwargs)

    def _resource_apply_sparse(self, *args, **kwargs):
        return self._optimizer._resource_apply_sparse(*args, **kwargs)

    def _apply_sparse_duplicate_indices(self, *args, **kwargs):
        return self._optimizer._apply_sparse_duplicate_indices(*args, **kwargs)

    def _apply_sparse(self, *args, **kwargs):
        return self._optimizer._apply_sparse(*args, **kwargs)

    def _finish(self, *args, **kwargs):
        return self._optimizer._finish(*args, **kwargs)


def DistributedOptimizer(optimizer, name=None, use_locking=False,
                         device_dense='', device_sparse='',
                         compression=Compression.none, sparse_as_dense=False,
                         backward_passes_per_step=1, op=Average,
                         gradient_predivide_factor=1.0,
                         average_aggregated_gradients=False, num_groups=0,
                         groups=None, process_set=None, scale_local_gradients=True,
                         sharded=False):
    """Wrap ``optimizer`` so that it averages gradients over all ranks.

    Args:
      optimizer: a ``tf.compat.v1.train.Optimizer`` or a Keras 3 optimizer.
      name: name of the wrapper (default ``"Distributed" + class name``).
      use_locking: passed to the TF1 optimizer base class.
      device_dense, device_sparse: devices for the dense / sparse reductions.
      compression: ``Compression.none`` or ``Compression.fp16`` (dense
        gradients travel as float16).
      sparse_as_dense: turn ``tf.IndexedSlices`` gradients into dense tensors
        before reducing them (otherwise they are allgathered).
      backward_passes_per_step: accumulate this many passes locally before
        communicating and applying.
      op: ``Average`` (default), ``Sum``, ... (the reduction).
      gradient_predivide_factor: divide by this before the sum and by
        ``size / factor`` after it (op must be Average).
      average_aggregated_gradients: divide the accumulated gradients by
        ``backward_passes_per_step``.
      num_groups: deprecated; same as ``groups=num_groups``.
      groups: an int (send the gradients as that many grouped allreduces) or
        a list of lists of variables (the gradients of each list go together).
      process_set: average over this hvd.ProcessSet's ranks only (default:
        every rank); only its members may use the optimizer.
      scale_local_gradients: divide the gradients of variables registered
        with ``register_local_var`` by ``hvd.size()`` (Horovod's default).
      sharded: (tf_hvd; Keras 3 and tf-keras optimizers) keep the optimizer's slots
        for 1/N of the parameters on each rank: gradients averaged by
        reduce-scatter, each rank updates its slice, the parameters are
        allgathered (docs/training.md, "Sharded optimizer state").

    The parameters are Horovod's, in Horovod's order, then ``sharded``.

    Raises:
      TypeError: the optimizer is neither kind.

    Example:

    >>> hvd.init()
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.01 * hvd.size()))
    >>> model.compile(optimizer=opt, loss="mse")
    >>> history = model.fit(np.ones((8, 2)), np.ones((8, 1)), epochs=2, verbose=0)
    >>> len(history.history["loss"])
    2
    >>> tf1 = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.01))
    >>> tf1.get_name()
    'DistributedGradientDescentOptimizer'
    """
    params = ReductionParams.from_call(locals())
    if isinstance(optimizer, _DistributedOptimizer):
        raise ValueError("the optimizer is already a DistributedOptimizer")
    if sharded and isinstance(optimizer, _LegacyOptimizer):
        raise ValueError(
            "DistributedOptimizer(sharded=True) supports Keras optimizers only; "
            "%s is a TF1 optimizer (tf.compat.v1.train): use sharded=False in TF1 "
            "graphs" % type(optimizer).__name__)
    if isinstance(optimizer, _LegacyOptimizer) and op == Adasum:
        if average_aggregated_gradients:
            raise ValueError("Adasum does not support average_aggregated_gradients=True")
        return DistributedAdasumOptimizer(optimizer, params)
    if isinstance(optimizer, _LegacyOptimizer):
        return _DistributedOptimizer(optimizer, params)
    if optimizer_kind(optimizer) is not None:  # Keras 3 or tf-keras 2 (new or legacy)
        return create_distributed_optimizer(optimizer, params, sharded=sharded)
    raise TypeError(
        "DistributedOptimizer needs a tf.compat.v1.train.Optimizer or a Keras "
        "optimizer (keras.optimizers.Optimizer); got %s.%s"
        % (type(optimizer).__module__, type(optimizer).__name__))

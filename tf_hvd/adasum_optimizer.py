"""The delta-based Adasum optimizer: ``DistributedOptimizer(tf1_opt, op=hvd.Adasum)``.

As in Horovod, a ``tf.compat.v1.train.Optimizer`` wrapped with ``op=Adasum``
does not reduce gradients: each rank applies its *local* gradients with the
wrapped optimizer, then the change of every variable since the last
communication (the delta) is combined across ranks with Adasum, and every
rank sets ``var = start + Adasum(deltas)`` (``start``: the value after the
last communication, kept in a non-trainable ``<var>/delta_start`` variable).
With ``backward_passes_per_step = k`` ranks communicate every k-th step and
step locally in between.

One difference from Horovod 0.28, whose ``apply_gradients`` forwards to the
wrapped optimizer and so never reaches its delta logic: here
``apply_gradients`` (and ``minimize``) do apply it.

    opt = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1),
                                   op=hvd.Adasum)
    train_op = opt.minimize(loss)
"""

import tensorflow as tf

from tf_hvd import ops
from tf_hvd.reduce_ops import Adasum

_LegacyOptimizer = tf.compat.v1.train.Optimizer


class DistributedAdasumOptimizer(_LegacyOptimizer):
    """A TF1 optimizer that applies local updates and combines weight deltas with Adasum."""

    def __init__(self, optimizer, params):
        """``params``: a tf_hvd.reduction_params.ReductionParams (op Adasum)."""
        name = params.name
        if name is None:
            name = "DistributedDelta{}".format(type(optimizer).__name__)
        super(DistributedAdasumOptimizer, self).__init__(name=name,
                                                         use_locking=params.use_locking)
        self._optimizer = optimizer
        self._device_dense = params.device_dense
        self._device_sparse = params.device_sparse
        self._compression = params.compression
        self._passes = params.backward_passes_per_step
        self._starts = {}
        self._step_count = None

    def _start_of(self, var):
        key = var.ref()
        if key not in self._starts:
            # Filled from the variable on the first step (after any broadcast).
            with tf.init_scope():
                self._starts[key] = tf.Variable(
                    tf.zeros(var.shape, var.dtype.base_dtype), trainable=False,
                    name=var.name.split(":")[0] + "/delta_start")
        return self._starts[key]

    def compute_gradients(self, *args, **kwargs):
        """The wrapped optimizer's local gradients (nothing is reduced)."""
        return self._optimizer.compute_gradients(*args, **kwargs)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """Applies the local gradients, then (every ``backward_passes_per_step``
        calls) replaces each variable by its start plus the Adasum of the deltas."""
        grads_and_vars = [(g, v) for g, v in grads_and_vars]
        variables = [v for g, v in grads_and_vars if g is not None]
        if self._step_count is None:
            with tf.init_scope():
                self._step_count = tf.Variable(0, dtype=tf.int64, trainable=False,
                                               name=self.get_name() + "_step_count")
        starts = [self._start_of(v) for v in variables]
        first = tf.equal(self._step_count, 0)

        def init_starts():
            return tf.group([s.assign(v, use_locking=self._use_locking)
                             for s, v in zip(starts, variables)])

        init = tf.cond(first, init_starts, tf.no_op)
        with tf.control_dependencies([init]):
            applied = self._optimizer.apply_gradients(grads_and_vars, global_step=global_step,
                                                      name=name)
        comm = tf.equal(self._step_count % self._passes, self._passes - 1)

        def communicate():
            deltas = [v.read_value() - s.read_value() for v, s in zip(variables, starts)]
            compressed = [self._compression.compress(d) for d in deltas]
            with tf.device(self._device_dense):
                reduced = ops.grouped_allreduce([c for c, _ in compressed], op=Adasum,
                                                name=self.get_name() + "_delta")
            updates = []
            for (c, ctx), r, v, s in zip(compressed, reduced, variables, starts):
                new_start = s.assign_add(self._compression.decompress(r, ctx),
                                         use_locking=self._use_locking)
                updates.append(v.assign(new_start, use_locking=self._use_locking))
            return tf.group(updates)

        with tf.control_dependencies([applied] if applied is not None else []):
            done = tf.cond(comm, communicate, tf.no_op)
        with tf.control_dependencies([done]):
            counted = self._step_count.assign_add(1)
        if tf.executing_eagerly():
            return None
        return counted.op

    def get_slot(self, var, name):
        if name == "delta_start" and var.ref() in self._starts:
            return self._starts[var.ref()]
        return self._optimizer.get_slot(var, name)

    def get_slot_names(self):
        return ["delta_start"] + self._optimizer.get_slot_names()

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)

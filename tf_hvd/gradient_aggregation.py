"""Local gradient aggregation: communicate every ``backward_passes_per_step`` passes.

Each backward pass adds its gradients to local accumulators and counts itself.
On every ``backward_passes_per_step``-th pass the accumulated gradients (divided
by the number of passes when ``average_aggregated_gradients`` is set) are
allreduced, the accumulators and the counter go back to zero, and the optimizer
applies the result. On the passes in between nothing is sent and the optimizer
does not update the model.

Two variants share the logic:

* ``LocalGradientAggregationHelper`` for TF1 graphs: the counter and the
  accumulators are local variables (``tf.compat.v1.GraphKeys.LOCAL_VARIABLES``,
  initialised by ``MonitoredTrainingSession``'s local init op), the decisions are
  ``tf.cond`` ops with explicit control dependencies.
* ``LocalGradientAggregationHelperEager`` for eager code and ``tf.function``
  (Keras 3 optimizers, custom loops): plain ``tf.Variable`` state created once
  outside any function (``tf.init_scope``).

``tf.IndexedSlices`` gradients are accumulated into dense accumulators with a
scatter-add (so after aggregation they are reduced as dense tensors; Horovod
raises ValueError for them unless ``sparse_as_dense``).
``None`` gradients stay ``None``; the set of ``None`` positions must not change
between calls.

Both take Horovod's constructor parameters in Horovod's order and have
``register_local_var(var)``: the gradients of such a variable are never
allreduced, only divided by a local scaling factor (the number of ranks when
``scale_local_gradients`` is on, Horovod's default), so that they match the
averaged gradients of the other variables::

    helper = LocalGradientAggregationHelperEager(
        4, allreduce_func, sparse_as_dense=False, average_aggregated_gradients=True,
        local_gradients_scaling_factor=hvd.size())
    helper.register_local_var(embedding)
"""

import tensorflow as tf

from tf_hvd import topology
from tf_hvd.process_sets import registered_set_id


def _ref(var):
    """A hashable key for a variable (tf.Variable and Keras variables)."""
    ref = getattr(var, "ref", None)
    return ref() if callable(ref) else id(var)


class _AggregationBase(object):
    """Shared algorithm; subclasses decide how the state variables are made."""

    def __init__(self, backward_passes_per_step, allreduce_func,
                 sparse_as_dense=False, average_aggregated_gradients=False,
                 name="hvd_aggregation"):
        if int(backward_passes_per_step) < 1:
            raise ValueError("backward_passes_per_step must be >= 1, got %r"
                             % (backward_passes_per_step,))
        self.backward_passes_per_step = int(backward_passes_per_step)
        self.allreduce_grads = allreduce_func
        self.sparse_as_dense = sparse_as_dense
        self.average_aggregated_gradients = average_aggregated_gradients
        self.name = name or "hvd_aggregation"
        self.counter = None
        self.accumulators = None     # one per gradient position, None for None grads
        self._none_positions = None
        self._local_vars = set()

    def register_local_var(self, var):
        """Marks ``var`` as worker-local: its gradients are never allreduced,
        only divided by the local scaling factor (see the module docstring)."""
        self._local_vars.add(_ref(var))

    def _local_scaling_factor(self):
        """What the gradients of local variables are divided by."""
        return 1.0

    # -- state -------------------------------------------------------------
    def _make_variable(self, name, initial_value, dtype):
        raise NotImplementedError

    def _init_state(self, grads):
        none_positions = tuple(i for i, g in enumerate(grads) if g is None)
        if self.counter is not None:
            if (len(grads) != len(self.accumulators)
                    or none_positions != self._none_positions):
                raise ValueError(
                    "The gradients passed to the local gradient aggregation "
                    "changed between calls (count or None positions); "
                    "backward_passes_per_step > 1 needs the same variables "
                    "to get gradients on every pass.")
            return
        with tf.init_scope():
            self.counter = self._make_variable("counter", 0, tf.int32)
            accs = []
            for i, g in enumerate(grads):
                if g is None:
                    accs.append(None)
                    continue
                if isinstance(g, tf.IndexedSlices):
                    shape = tf.TensorShape(tf.get_static_value(g.dense_shape))
                    if not shape.is_fully_defined():
                        raise ValueError("cannot aggregate an IndexedSlices "
                                         "gradient with unknown dense shape")
                else:
                    shape = g.shape
                    if not shape.is_fully_defined():
                        raise ValueError("cannot aggregate a gradient with "
                                         "unknown shape %s" % (shape,))
                accs.append(self._make_variable(
                    "grad_%d" % i, tf.zeros(shape, g.dtype), g.dtype))
        self.accumulators = accs
        self._none_positions = none_positions

    # -- the algorithm -----------------------------------------------------
    def _accumulate(self, grads):
        updates = []
        for g, acc in zip(grads, self.accumulators):
            if g is None:
                continue
            if isinstance(g, tf.IndexedSlices):
                if self.sparse_as_dense:
                    updates.append(acc.assign_add(tf.convert_to_tensor(g)))
                else:
                    updates.append(acc.scatter_add(g))
            else:
                updates.append(acc.assign_add(g))
        return updates

    def compute_gradients(self, grads, vars=None):  # noqa: A002 - Horovod's name
        """Add ``grads`` to the accumulators; every N-th call return the
        allreduced aggregate (otherwise the local aggregate, which the
        conditional apply ignores)."""
        grads = list(grads)
        self._init_state(grads)
        positions = [i for i, g in enumerate(grads) if g is not None]
        live_vars = None
        if vars is not None:
            variables = list(vars)
            live_vars = [variables[i] for i in positions]
        live_accs = [self.accumulators[i] for i in positions]
        n = self.backward_passes_per_step
        if not live_accs:
            # Nothing to aggregate (every gradient is None).
            return grads

        with tf.name_scope(self.name):
            updates = self._accumulate(grads)
            with tf.control_dependencies(updates):
                count = self.counter.assign_add(1)
                count = tf.convert_to_tensor(count)

            def read_aggregates():
                values = [a.read_value() for a in live_accs]
                if self.average_aggregated_gradients and n > 1:
                    values = [v / tf.cast(n, v.dtype) for v in values]
                return values

            def communicate():
                values = read_aggregates()
                reduced = self._reduce_shared(values, live_vars)
                reduced = [tf.convert_to_tensor(r) for r in reduced]
                with tf.control_dependencies(reduced):
                    resets = [a.assign(tf.zeros_like(a)) for a in live_accs]
                    resets.append(self.counter.assign(0))
                with tf.control_dependencies(resets):
                    return [tf.identity(r) for r in reduced]

            def keep_local():
                return [tf.identity(v) for v in read_aggregates()]

            out = tf.cond(tf.equal(count, n), communicate, keep_local)
            if not isinstance(out, (list, tuple)):
                out = [out]
        result = [None] * len(grads)
        for i, r in zip(positions, out):
            result[i] = r
        return result

    def _reduce_shared(self, values, variables):
        """Allreduces the values of shared variables; local ones are divided by
        the local scaling factor instead."""
        if not self._local_vars or variables is None:
            return self.allreduce_grads(values, variables)
        local = [_ref(v) in self._local_vars for v in variables]
        shared = [i for i, is_local in enumerate(local) if not is_local]
        out = list(values)
        reduced = self.allreduce_grads([values[i] for i in shared],
                                       [variables[i] for i in shared]) if shared else []
        for i, r in zip(shared, reduced):
            out[i] = r
        factor = self._local_scaling_factor()
        if factor != 1.0:
            for i, is_local in enumerate(local):
                if is_local:
                    out[i] = out[i] / tf.cast(factor, out[i].dtype)
        return out

    def apply_gradients(self, apply_grads_closure, optimizer=None, *args, grads=None,
                        skip_fn=None, **kwargs):
        """Run ``apply_grads_closure`` only on the passes that communicated
        (else ``skip_fn`` if given).

        Horovod's form ``apply_gradients(closure, optimizer, grads_and_vars,
        global_step=...)`` works too: then the decision is read after the
        gradients of ``grads_and_vars``, and on the other passes
        ``global_step`` and the optimizer's ``iterations`` (if it has one)
        advance, as in Horovod. Otherwise ``grads`` are the tensors returned
        by compute_gradients. Returns a boolean tensor: whether the update ran.
        """
        apply_fn = apply_grads_closure
        if grads is None and args:
            grads = [g for g, _ in args[0]]
        if skip_fn is None and (optimizer is not None or "global_step" in kwargs):
            skip_fn = _horovod_skip_fn(optimizer, kwargs.get("global_step"))
        deps = [g.values if isinstance(g, tf.IndexedSlices) else g
                for g in (grads or []) if g is not None]
        with tf.control_dependencies(deps):
            ready = tf.equal(self.counter.read_value(), 0)

        def do_apply():
            op = apply_fn()
            deps = [op] if op is not None else []
            with tf.control_dependencies(deps):
                return tf.constant(True)

        def do_skip():
            op = skip_fn() if skip_fn is not None else None
            deps = [op] if op is not None else []
            with tf.control_dependencies(deps):
                return tf.constant(False)

        return tf.cond(ready, do_apply, do_skip)


def _horovod_skip_fn(optimizer, global_step):
    """What Horovod does on a pass that does not apply: advance the global
    step and the optimizer's ``iterations``."""
    def skip():
        ops = []
        if global_step is not None:
            ops.append(global_step.assign_add(tf.ones([], global_step.dtype)))
        iterations = getattr(optimizer, "iterations", None) if optimizer is not None else None
        if iterations is not None and hasattr(iterations, "assign_add"):
            ops.append(iterations.assign_add(tf.ones([], iterations.dtype)))
        return tf.group(*ops) if ops else None
    return skip


class LocalGradientAggregationHelper(_AggregationBase):
    """TF1 graph variant: local variables, tf.cond.

    Horovod's parameters: ``rank`` and ``optimizer_type`` are accepted and
    not needed (the state is made once per helper); ``process_set`` must be
    the global one; with ``scale_local_gradients`` the gradients of variables
    given to ``register_local_var`` are divided by ``hvd.size()``.
    """

    _OPTIMIZER_TYPE_KERAS = "optimizer_type_keras"
    _OPTIMIZER_TYPE_LEGACY = "optimizer_type_legacy"

    def __init__(self, backward_passes_per_step, allreduce_func,
                 sparse_as_dense=False, average_aggregated_gradients=False,
                 rank=None, optimizer_type=None, process_set=None,
                 scale_local_gradients=True, name=""):
        registered_set_id(process_set)
        super(LocalGradientAggregationHelper, self).__init__(
            backward_passes_per_step, allreduce_func, sparse_as_dense,
            average_aggregated_gradients, name)
        self.rank = rank
        self.optimizer_type = optimizer_type
        self.process_set = process_set
        self.scale_local_gradients = scale_local_gradients
        self._scope = None

    def _local_scaling_factor(self):
        if not self.scale_local_gradients:
            return 1.0
        return float(topology.size())

    def _make_variable(self, name, initial_value, dtype):
        if tf.executing_eagerly():
            return tf.Variable(initial_value, dtype=dtype, trainable=False,
                               name="%s_%s" % (self.name, name))
        if self._scope is None:
            with tf.compat.v1.variable_scope(None, default_name=self.name) as s:
                self._scope = s
        with tf.compat.v1.variable_scope(self._scope, auxiliary_name_scope=False):
            init = tf.convert_to_tensor(initial_value, dtype=dtype)
            return tf.compat.v1.get_variable(
                name, initializer=init, dtype=dtype, trainable=False,
                use_resource=True,
                collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES])


class LocalGradientAggregationHelperEager(_AggregationBase):
    """Eager / tf.function variant: tf.Variable state made once, outside
    functions. Called with ``grads=`` (tf_hvd's Keras optimizer does),
    nothing happens on the passes that do not apply (a Keras optimizer's
    ``iterations`` counts applied updates only); called Horovod's way, with
    the optimizer, its ``iterations`` advances on those passes too.

    Horovod's parameters in Horovod's order, plus ``name``; the gradients of
    variables given to ``register_local_var`` are divided by
    ``local_gradients_scaling_factor`` (when it is above 1, as Horovod).
    """

    def __init__(self, backward_passes_per_step, allreduce_func,
                 sparse_as_dense=False, average_aggregated_gradients=False,
                 local_gradients_scaling_factor=1.0, name="hvd_aggregation"):
        super(LocalGradientAggregationHelperEager, self).__init__(
            backward_passes_per_step, allreduce_func, sparse_as_dense,
            average_aggregated_gradients, name)
        self.local_gradients_scaling_factor = local_gradients_scaling_factor

    def _local_scaling_factor(self):
        factor = float(self.local_gradients_scaling_factor)
        return factor if factor > 1.0 else 1.0

    def _make_variable(self, name, initial_value, dtype):
        return tf.Variable(initial_value, dtype=dtype, trainable=False,
                           name="%s_%s" % (self.name, name))

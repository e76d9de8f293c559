"""A sharded optimizer's state on this rank, and the parts of one step.

``ShardedState`` lives in one plain attribute of the optimizer (``_hvd_shard``, which
Keras' variable tracking does not look inside). It holds the layout (layout.py), the
model's variables, this rank's flat *shard variables* (what the wrapped optimizer is
built on and updates), and it does the step's collectives; keras3.py and tf_keras.py
run it in their Keras' own step::

    st = ShardedState(params, "DistributedAdam")
    st.setup(optimizer, model.trainable_variables)          # a collective: same variables?
    grads = st.in_layout_order(grads, variables)
    shard_grads = st.shard_grads(grads, pre_reduced=False)  # one reduce-scatter per dtype
    st.refresh_shards()
    ...                                                     # Keras updates st.shards
    st.write_back()                                         # one allgather per dtype
"""

import numpy as np
import tensorflow as tf

from tf_hvd import ops
from tf_hvd._keras.sharding import variable_keys
from tf_hvd._keras.sharding.layout import ShardLayout, mismatch_message
from tf_hvd._keras.sharding.support import check_no_weight_decay_exclusions
from tf_hvd._keras.state import var_key
from tf_hvd.allreduce_grads import scale_factors
from tf_hvd.exceptions import ShardingError
from tf_hvd.functions import allgather_object
from tf_hvd.gradient_aggregation import (LocalGradientAggregationHelper,
                                         LocalGradientAggregationHelperEager)
from tf_hvd.process_sets import registered_set_id, set_rank_size
from tf_hvd.reduce_ops import REDUCE_OP_NAMES, Average, Sum
from tf_hvd.sharded_rows import is_sharded_rows


class ShardedState(object):
    """This rank's part of a sharded optimizer (see the module docstring); the methods
    that differ between the Kerases are overridden in tf_keras.py."""

    def __init__(self, params, name):
        if params.op not in (Average, Sum):
            raise ShardingError(
                "DistributedOptimizer(sharded=True) reduces with reducescatter, which "
                "takes op=hvd.Average or hvd.Sum, not %s" % REDUCE_OP_NAMES[params.op])
        if params.groups:
            raise ShardingError(
                "DistributedOptimizer(sharded=True) takes no groups/num_groups: the "
                "gradients of one dtype always travel as one reduce-scatter")
        self.params = params
        self.name = name
        self.set_id = registered_set_id(params.process_set)
        self.op, self.prescale, self.postscale = scale_factors(
            params.op, params.gradient_predivide_factor)
        self.layout = None
        self.model_vars = []
        self.keys = {}
        self.shards = []
        self.rank, self.size = 0, 1
        self.records = {}
        self.slot_keys = None      # optimizer.variables as variable_keys.structure keys
        self.plain_keys = None     # the unsharded optimizer's variables, same keys
        self.pending = None        # (iterations, values) gathered for a save
        self.before_build = []     # (optimizer, ids of its variables before build)
        self.agg_helper = None
        if params.backward_passes_per_step > 1:
            helper = (LocalGradientAggregationHelperEager if tf.executing_eagerly()
                      else LocalGradientAggregationHelper)
            self.agg_helper = helper(
                params.backward_passes_per_step, lambda grads, variables: list(grads),
                sparse_as_dense=True,
                average_aggregated_gradients=params.average_aggregated_gradients,
                name=name + "_aggregation")

    # -- building ----------------------------------------------------------
    def setup(self, optimizer, variables):
        """Lay out ``variables`` (the model's trainable variables), check that
        every rank has the same ones, and make the shard variables."""
        import keras
        check_no_weight_decay_exclusions(optimizer)
        tables = [getattr(v, "path", None) or v.name for v in variables if is_sharded_rows(v)]
        if tables:  # each rank holds other rows of them: nothing to flatten and slice
            raise ShardingError(
                "DistributedOptimizer(sharded=True) cannot shard the state of the sharded "
                "embedding tables %s (a DistributedEmbedding keeps its rows' optimizer "
                "state on their ranks already); use sharded=False" % ", ".join(tables))
        self.rank, self.size = set_rank_size(self.set_id)
        described = []
        for v in variables:
            name = getattr(v, "path", None) or getattr(v, "name", "?")
            described.append((name, tuple(v.shape), tf.as_dtype(v.dtype).name))
        layout = ShardLayout(described, self.size)
        if self.size > 1:
            everyone = allgather_object(
                (layout.signature(), [d[0] for d in described]),
                name="%s.sharded_layout" % self.name,
                process_set=self.params.process_set)
            message = mismatch_message([e[0] for e in everyone], [e[1] for e in everyone],
                                       self._set_ranks())
            if message:
                raise ShardingError(message)
        self.layout = layout
        self.model_vars = list(variables)
        self.keys = dict((var_key(v), i) for i, v in enumerate(self.model_vars))
        self.shards = [
            keras.Variable(np.zeros([g.shard_size(self.rank)], dtype=g.dtype),
                           dtype=g.dtype, trainable=True,
                           name="hvd_shard_%s" % g.dtype)
            for g in layout.groups]
        variable_keys.record_references(optimizer, self.records)

    def _set_ranks(self):
        ps = self.params.process_set
        if ps is None or self.set_id == 0 or not getattr(ps, "ranks", None):
            return list(range(self.size))
        return list(ps.ranks)

    def optimizer_variables(self):
        """What the wrapped optimizer is built on and updates: the shards."""
        return self.shards

    def new_stand_in(self, i, dtype):
        """A one-element variable standing in for model variable ``i``."""
        import keras
        return keras.Variable(np.zeros([1], dtype=dtype), name="stand_in_%d" % i)

    def forget_build(self, opt, kept):
        """Drop the variables ``opt`` made when it was built (all but ``kept``)."""
        for v in [v for v in opt._variables if id(v) not in kept]:
            opt._untrack_variable(v)
        opt._trainable_variables_indices.clear()
        opt.built = False

    def finish_build(self, optimizer):
        self.slot_keys = variable_keys.structure(
            optimizer, self.optimizer_variables(), self.records)

    def unbuild(self):
        """Drop the layout, the shards and the variables the optimizer (and a
        LossScaleOptimizer's inner one) made when it was built, so that it builds
        again for the ranks as they are now; iterations and learning rate stay."""
        for opt, kept in self.before_build:
            self.forget_build(opt, kept)
        self.layout, self.shards, self.keys = None, [], {}
        self.records.clear()
        self.slot_keys, self.pending, self.before_build = None, None, []

    # -- one step ----------------------------------------------------------
    def in_layout_order(self, grads, variables):
        """The gradients in build order, dense, zeros where there is none."""
        out = [None] * len(self.model_vars)
        for g, v in zip(grads, variables):
            i = self.keys.get(var_key(v))
            if i is None:
                raise ShardingError(
                    "sharded optimizer: variable '%s' is not one the optimizer was "
                    "built on; a sharded optimizer updates the variables of its first "
                    "apply()/build() only" % (getattr(v, "path", None) or v.name))
            if isinstance(g, tf.IndexedSlices):
                g = tf.convert_to_tensor(g)
            out[i] = g
        for i, g in enumerate(out):
            if g is None:
                v = self.model_vars[i]
                out[i] = tf.zeros(v.shape, dtype=v.dtype)
        return out

    def shard_grads(self, grads, pre_reduced):
        """Each group's gradients flattened and reduce-scattered (or, already
        averaged by a DistributedGradientTape, just sliced)."""
        out = []
        for k, group in enumerate(self.layout.groups):
            flat = tf.concat([tf.reshape(tf.cast(grads[i], group.dtype), [-1])
                              for i in group.members], 0)
            if pre_reduced or self.size == 1:
                start, end = group.bounds(self.rank)
                out.append(flat[start:end])
                continue
            out.append(ops.reducescatter(
                flat, device_dense=self.params.device_dense,
                compression=self.params.compression, op=self.op,
                prescale_factor=self.prescale, postscale_factor=self.postscale,
                name="%s_shard_grads_%d" % (self.name, k), ignore_name_scope=True,
                process_set=self.params.process_set))
        return out

    def _slice_of(self, values, k):
        """Rank's slice of group k from per-variable tensors (or numpy arrays)."""
        group = self.layout.groups[k]
        parts = [tf.reshape(values[p.var], [-1])[p.lo:p.hi]
                 for p in group.pieces(self.rank)]
        if not parts:
            return tf.zeros([0], dtype=group.dtype)
        return parts[0] if len(parts) == 1 else tf.concat(parts, 0)

    def refresh_shards(self):
        """Copy the model's current values of the rank's slices into the shards
        (so that weights set from outside, e.g. a broadcast, are picked up)."""
        for k, shard in enumerate(self.shards):
            shard.assign(self._slice_of(self.model_vars, k))

    def write_back(self):
        """Allgather the updated shards into the model's variables."""
        for k, (group, shard) in enumerate(zip(self.layout.groups, self.shards)):
            if self.size == 1:
                full = tf.convert_to_tensor(shard.value)
            else:
                full = ops.allgather(shard.value, name="%s_shard_params_%d" % (self.name, k),
                                     ignore_name_scope=True,
                                     process_set=self.params.process_set)
            pieces = tf.split(full, group.sizes) if len(group.sizes) > 1 else [full]
            for i, piece in zip(group.members, pieces):
                v = self.model_vars[i]
                v.assign(tf.reshape(piece, v.shape))

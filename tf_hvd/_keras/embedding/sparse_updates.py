"""The optimizer's side of a DistributedEmbedding: a tf_hvd DistributedOptimizer
hands each table's gradient (an IndexedSlices of this rank's rows) to the layer,
which updates only those rows with the table's rule (sparse_rules.py).

    layer.apply_sparse_gradient(table_variable, grad, optimizer)

``SparseUpdates`` is a part of DistributedEmbedding (layer.py), over its tables.
"""

import tensorflow as tf

from tf_hvd._keras.embedding.sparse_rules import rule_for
from tf_hvd._keras.embedding.tables import make_slots
from tf_hvd._keras.state import var_key


class SparseUpdates(object):
    """DistributedEmbedding's methods that update its tables' rows."""

    def table_for(self, variable):
        return self._hvd.by_variable.get(var_key(variable))

    def prepare_sparse_update(self, variable, optimizer):
        """Make ``optimizer``'s slots for the rows of ``variable`` (once per
        optimizer class); ShardingError if it cannot update rows."""
        state = self.table_for(variable)
        if state.own_optimizer is not None:
            rule_class = type(state.own_optimizer)
        else:
            rule_class = getattr(type(optimizer), "_hvd_base", type(optimizer))
            if state.rule_class is not rule_class:
                state.rule = rule_for(optimizer, state.name)
        if state.rule_class is rule_class:
            return state
        make_slots(state, self.variable_dtype)
        state.rule_class = rule_class
        return state

    def apply_sparse_gradient(self, variable, grad, optimizer):
        """Apply ``grad`` (an IndexedSlices of local rows) to the table
        ``variable`` with the table's optimizer (its own, or ``optimizer``)."""
        state = self.prepare_sparse_update(variable, optimizer)
        stepper = state.own_optimizer or optimizer
        if not isinstance(grad, tf.IndexedSlices):
            grad = tf.convert_to_tensor(grad)
            grad = tf.IndexedSlices(grad, tf.range(tf.shape(grad)[0]))
        values = tf.cast(grad.values, variable.dtype)
        scale = getattr(optimizer, "loss_scale_factor", None)
        if scale is not None:
            values = values / scale
        clipvalue = getattr(stepper, "clipvalue", None)
        if clipvalue:
            values = tf.clip_by_value(values, -clipvalue, clipvalue)
        rows, position = tf.unique(tf.cast(grad.indices, tf.int32))
        summed = tf.math.unsorted_segment_sum(values, position, tf.shape(rows)[0])
        lr = tf.cast(stepper._get_current_learning_rate(), variable.dtype)
        state.rule.apply(state.shard, state.slots, rows, summed, lr,
                         tf.convert_to_tensor(stepper.iterations))
        if state.own_optimizer is not None:
            state.own_optimizer.iterations.assign_add(1)

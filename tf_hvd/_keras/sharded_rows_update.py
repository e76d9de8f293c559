"""How a Keras 3 DistributedOptimizer treats variables whose rows are sharded
over the ranks (tf_hvd.sharded_rows; DistributedEmbedding's tables).

Their gradients are not reduced (the layer's backward pass already sent each
row's gradient, averaged, to the rank that owns the row) and Keras' dense
update never runs on them: the layer applies the optimizer's sparse rule to
the rows in the batch (``apply_sparse_gradient``), with the optimizer's
learning rate and ``iterations``, before Keras updates the other variables and
counts the step. The other variables' gradients are averaged unless a
DistributedGradientTape averaged them all (a mixture is a ShardingError: one rule,
tf_hvd._keras.sharded_state.pre_reduced)::

    dense = prepare(optimizer, variables)         # in build(): slots for the tables
    apply(optimizer, base_class, grads, variables)
"""

from tf_hvd._keras.sharded_state.pre_reduced import pre_reduced
from tf_hvd._keras.state import build_on_first_apply
from tf_hvd.exceptions import ShardingError
from tf_hvd.sharded_rows import sharded_rows_owner


def has_sharded_rows(variables):
    return any(sharded_rows_owner(v) is not None for v in variables)


def prepare(optimizer, variables):
    """Let each table's layer make ``optimizer``'s slots for its rows; returns
    the other variables (what Keras builds on)."""
    dense = []
    for v in variables:
        owner = sharded_rows_owner(v)
        if owner is None:
            dense.append(v)
        else:
            owner.prepare_sparse_update(v, optimizer)
    return dense


def apply(optimizer, base, grads, variables):
    """One step of ``optimizer`` (a DistributedOptimizer of Keras class ``base``)
    with some variables holding sharded rows."""
    state = optimizer._hvd
    if state.agg_helper is not None:
        raise ShardingError(
            "DistributedOptimizer(backward_passes_per_step=%d) cannot update the sharded "
            "rows of a DistributedEmbedding (the rows' gradients are not accumulated); "
            "use backward_passes_per_step=1" % state.params.backward_passes_per_step)
    build_on_first_apply(optimizer, variables)
    tables = [(g, v) for g, v in zip(grads, variables) if sharded_rows_owner(v) is not None]
    dense = [(g, v) for g, v in zip(grads, variables) if sharded_rows_owner(v) is None]
    dense_grads = [g for g, _ in dense]
    dense_vars = [v for _, v in dense]
    # the tables' gradients are not asked: no tape reduces them (sharded_state.pre_reduced)
    if dense and not pre_reduced(dense_grads):
        dense_grads = state.compute(dense_grads, dense_vars)
    for g, v in tables:
        if g is not None:
            sharded_rows_owner(v).apply_sparse_gradient(v, g, optimizer)
    if dense:
        base.apply(optimizer, dense_grads, dense_vars)
    else:
        optimizer.iterations.assign_add(1)

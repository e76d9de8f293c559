"""Gradient clipping and a LossScaleOptimizer's finiteness check on a rank's shard, so
that they equal the unsharded optimizer's: the norms (``clipnorm`` per variable,
``global_clipnorm``) are summed over every rank's slice with a tiny allreduce, the
finiteness is agreed by all ranks (allreduce Min); ``clipvalue`` is elementwise::

    shard_grads = clip(optimizer._hvd_shard, optimizer, shard_grads)
"""

import tensorflow as tf

from tf_hvd import ops
from tf_hvd.reduce_ops import Min, Sum


def clip(state, optimizer, grads):
    """Keras' clipping of the shard gradients ``grads`` (one per dtype group of the
    ShardedState ``state``), with norms over all ranks."""
    clipnorm = optimizer.clipnorm
    global_clipnorm = optimizer.global_clipnorm
    if clipnorm and clipnorm > 0:
        return _clip_per_variable(state, grads, clipnorm)
    if global_clipnorm and global_clipnorm > 0:
        squares = [tf.reduce_sum(tf.square(tf.cast(g, tf.float32))) for g in grads]
        total = _sum_over_ranks(state, tf.add_n(squares), "global_norm")
        norm = tf.sqrt(total)
        scale = global_clipnorm * tf.minimum(1.0 / norm, 1.0 / global_clipnorm)
        scale = scale + (norm - norm)
        return [g * tf.cast(scale, g.dtype) for g in grads]
    if optimizer.clipvalue and optimizer.clipvalue > 0:
        c = optimizer.clipvalue
        return [tf.clip_by_value(g, -c, c) for g in grads]
    return grads


def all_finite(state, finite):
    """A LossScaleOptimizer's finiteness check (this rank's ``finite``) agreed by every
    rank of ``state``'s optimizer."""
    if state.size == 1:
        return finite
    agreed = ops.allreduce(tf.cast(finite, tf.int32), op=Min,
                           name="%s_all_finite" % state.name, ignore_name_scope=True,
                           process_set=state.params.process_set)
    return tf.cast(agreed, tf.bool)


def _sum_over_ranks(state, value, what):
    if state.size == 1:
        return value
    return ops.allreduce(value, op=Sum, name="%s_clip_%s" % (state.name, what),
                         ignore_name_scope=True, process_set=state.params.process_set)


def _clip_per_variable(state, grads, clipnorm):
    count = len(state.model_vars)
    sums = [tf.zeros([], tf.float32) for _ in range(count)]
    for k, group in enumerate(state.layout.groups):
        for p in group.pieces(state.rank):
            part = grads[k][p.at:p.at + p.hi - p.lo]
            sums[p.var] = sums[p.var] + tf.reduce_sum(tf.square(tf.cast(part, tf.float32)))
    l2sum = _sum_over_ranks(state, tf.stack(sums), "norms")
    safe = tf.where(l2sum > 0, l2sum, tf.ones_like(l2sum))
    l2norm = tf.where(l2sum > 0, tf.sqrt(safe), l2sum)
    denom = tf.maximum(l2norm, clipnorm)
    out = []
    for k, group in enumerate(state.layout.groups):
        parts = []
        for p in group.pieces(state.rank):
            part = grads[k][p.at:p.at + p.hi - p.lo]
            parts.append(part * tf.cast(clipnorm, part.dtype)
                         / tf.cast(denom[p.var], part.dtype))
        out.append(tf.concat(parts, 0) if parts else grads[k])
    return out

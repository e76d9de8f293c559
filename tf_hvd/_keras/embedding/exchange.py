"""The lookup of one table's ids over the ranks (TensorFlow; runs inside a Keras call).

For the ids this rank has (every feature of the table, flattened):

1. duplicates are removed (``tf.unique``): each distinct id travels once;
2. the ids are ordered by owning rank (row_layout.py's rule, written in TF ops)
   and sent with ``hvd.alltoall(ids, splits)``; every destination's part starts
   with two numbers, ``[has_bad_id, bad_id]``, so that an id outside the
   vocabulary stops *every* rank at the same point with the same message
   (naming the table, the id and the rank it came from) instead of leaving
   the others waiting in the next collective;
3. the owner gathers the rows from its shard and ``hvd.alltoall`` sends them
   back (the received splits, minus the headers, are the return splits);
4. the rows are put back in the order of the distinct ids, then of all ids.

The backward pass is the alltoall's gradient: each rank's row gradients go back
to the owners (summed there over ranks and duplicates by the gather's
gradient, an IndexedSlices of local rows), scaled by ``1/n`` so that a table's
gradient is the average over ranks, as the dense gradients' allreduce gives.
The gather and the update run on the device holding the shard; the alltoall
of GPU tensors uses NCCL where the library is built with it.

    rows = lookup(shard, ids, RowLayout(V, n), ctx)   # [len(ids), dim]
"""

import tensorflow as tf

from tf_hvd import ops


def _owner_and_local(ids, layout):
    """row_layout.RowLayout's owner/local_row in TF ops (int64)."""
    n = layout.n
    if layout.mode == "mod":
        return ids % n, ids // n
    base, extra = layout.base, layout.extra
    if base == 0:
        return ids, tf.zeros_like(ids)
    boundary = extra * (base + 1)
    owner = tf.where(ids < boundary, ids // (base + 1), extra + (ids - boundary) // base)
    start = owner * base + tf.minimum(owner, extra)
    return owner, ids - start


@tf.custom_gradient
def _scale_gradient(x, factor):
    def grad(dy):
        return dy * tf.cast(factor, dy.dtype), None
    return tf.identity(x), grad


class LookupContext(object):
    """What a lookup needs besides the shard and the ids: the table's name (for
    messages and collective names), the layer's name, rank and size, and the
    default row for ids outside the vocabulary (None: an error)."""

    def __init__(self, layer_name, table_name, rank, size, default_row=None):
        self.layer_name = layer_name
        self.table_name = table_name
        self.rank = int(rank)
        self.size = int(size)
        self.default_row = default_row

    def collective_name(self, what):
        return "DistributedEmbedding.%s.%s.%s" % (self.layer_name, self.table_name, what)


def check_ids(ids, layout, ctx):
    """``(ids to use, has_bad, first_bad)``: with a default row, bad ids become
    it; otherwise they become 0 (so nothing reads outside the table) and
    ``has_bad`` says whether there were any."""
    vocab = layout.vocabulary_size
    valid = tf.logical_and(ids >= 0, ids < vocab)
    if ctx.default_row is not None:
        return (tf.where(valid, ids, tf.constant(ctx.default_row, tf.int64)),
                tf.constant(0, tf.int64), tf.constant(0, tf.int64))
    invalid = tf.logical_not(valid)
    has_bad = tf.reduce_any(invalid)
    bad = tf.boolean_mask(ids, invalid)
    first_bad = tf.cond(has_bad, lambda: bad[0], lambda: tf.constant(0, tf.int64))
    return (tf.where(valid, ids, tf.zeros_like(ids)), tf.cast(has_bad, tf.int64), first_bad)


def _bad_id_message(ctx, vocab, source_rank, bad_id):
    return tf.strings.format(
        "DistributedEmbedding '%s': table '%s' got id {} on rank {}, outside its "
        "vocabulary [0, %d) (TableConfig.vocabulary_size); pass default_row= to map such "
        "ids to a row instead" % (ctx.layer_name, ctx.table_name, vocab),
        (bad_id, source_rank))


def _assert_ids(has_bad, bad_ids, source_ranks, ctx, vocab):
    """Every rank raises InvalidArgumentError if any rank had a bad id."""
    any_bad = tf.reduce_any(has_bad > 0)
    first = tf.argmax(tf.cast(has_bad > 0, tf.int32), output_type=tf.int32)
    message = _bad_id_message(ctx, vocab, tf.gather(source_ranks, first),
                              tf.gather(bad_ids, first))
    return tf.debugging.Assert(tf.logical_not(any_bad), [message], summarize=1)


def lookup(shard, ids, layout, ctx):
    """The rows of ``ids`` (int64, 1-D) of the table whose local rows are
    ``shard`` ([rows_on(rank), dim]), as a [len(ids), dim] tensor."""
    ids = tf.cast(tf.reshape(ids, [-1]), tf.int64)
    ids, has_bad, first_bad = check_ids(ids, layout, ctx)
    if ctx.size == 1:
        if ctx.default_row is None:
            check = _assert_ids(tf.reshape(has_bad, [1]), tf.reshape(first_bad, [1]),
                                tf.constant([0]), ctx, layout.vocabulary_size)
            with tf.control_dependencies([check]):
                ids = tf.identity(ids)
        return tf.gather(shard, ids)
    n = ctx.size
    unique, position = tf.unique(ids)
    owner, _ = _owner_and_local(unique, layout)
    order = tf.argsort(owner, stable=True)
    send = tf.gather(unique, order)
    counts = tf.math.bincount(tf.cast(owner, tf.int32), minlength=n, maxlength=n,
                              dtype=tf.int32)
    header = tf.stack([has_bad, first_bad])
    parts = tf.split(send, counts, num=n)
    message = tf.concat([piece for part in parts for piece in (header, part)], 0)
    received, received_counts = ops.alltoall(
        message, splits=counts + 2, name=ctx.collective_name("ids"), ignore_name_scope=True)
    pieces = tf.split(received, received_counts, num=n)
    headers = tf.stack([p[:2] for p in pieces])
    check = (_assert_ids(headers[:, 0], headers[:, 1], tf.range(n), ctx,
                         layout.vocabulary_size)
             if ctx.default_row is None else tf.no_op())
    with tf.control_dependencies([check]):
        wanted = tf.concat([p[2:] for p in pieces], 0)
    _, local = _owner_and_local(wanted, layout)
    rows = _scale_gradient(tf.gather(shard, local), 1.0 / n)
    back, _ = ops.alltoall(rows, splits=received_counts - 2,
                           name=ctx.collective_name("rows"), ignore_name_scope=True)
    unique_rows = tf.gather(back, tf.math.invert_permutation(order))
    return tf.gather(unique_rows, position)

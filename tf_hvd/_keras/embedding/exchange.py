"""The lookup of a group of tables' ids over the ranks (TensorFlow; runs in a Keras call).

The tables of one width and dtype are looked up together. For the ids this rank has
(every feature of a table, flattened):

1. duplicates are removed (``tf.unique``): each distinct id travels once;
2. each table's ids are ordered by owning rank (sharded_state/row_layout.py's rule, in TF ops)
   and one ``hvd.alltoall(ids, splits)`` sends every table's ids; each
   destination's part starts with ``[has_bad_id, bad_id, table]`` and the number
   of ids of every table, so that an id outside its vocabulary stops *every* rank
   at the same point with the same message (naming the table, the id and the rank
   it came from) instead of leaving the others waiting in the next collective;
3. the owner gathers the rows from its shards and one more ``hvd.alltoall`` sends
   them back (the received splits, minus the headers, are the return splits);
4. the rows are put back in the order of the distinct ids, then of all ids.

The backward pass is the alltoall's gradient: each rank's row gradients go back to
the owners (summed there over ranks and duplicates by the gather's gradient, an
IndexedSlices of local rows), scaled by ``1/n`` so that a table's gradient is the
average over ranks, as the dense gradients' allreduce gives. The gathers and the
update run on the device holding the shards; the alltoall of GPU tensors uses NCCL
where the library is built with it.

    rows = lookup_group([TableIds(shard, ids, RowLayout(V, n), "items")], ctx)
"""

import tensorflow as tf

from tf_hvd import ops


@tf.custom_gradient
def _scale_gradient(x, factor):
    def grad(dy):
        return dy * tf.cast(factor, dy.dtype), None
    return tf.identity(x), grad


class LookupContext(object):
    """What a lookup needs besides the tables: the layer's name (for messages and
    collective names), the group's name, rank and size."""

    def __init__(self, layer_name, group_name, rank, size):
        self.layer_name = layer_name
        self.group_name = group_name
        self.rank = int(rank)
        self.size = int(size)

    def collective_name(self, what):
        return "DistributedEmbedding.%s.%s.%s" % (self.layer_name, self.group_name, what)


class TableIds(object):
    """One table's part of a lookup: its local rows ``shard`` (the tf.Variable),
    the ids wanted (any shape, flattened), its RowLayout, name and default row
    (None: an id outside the vocabulary is an error)."""

    def __init__(self, shard, ids, layout, name, default_row=None):
        self.shard = shard
        self.ids = tf.cast(tf.reshape(ids, [-1]), tf.int64)
        self.layout = layout
        self.name = name
        self.default_row = default_row


def check_ids(table):
    """``(ids to use, has_bad, first_bad)``: with a default row, bad ids become
    it; otherwise they become 0 (so nothing reads outside the table) and
    ``has_bad`` says whether there were any."""
    ids = table.ids
    valid = tf.logical_and(ids >= 0, ids < table.layout.vocabulary_size)
    if table.default_row is not None:
        return (tf.where(valid, ids, tf.constant(table.default_row, tf.int64)),
                tf.constant(0, tf.int64), tf.constant(0, tf.int64))
    invalid = tf.logical_not(valid)
    has_bad = tf.reduce_any(invalid)
    bad = tf.boolean_mask(ids, invalid)
    first_bad = tf.cond(has_bad, lambda: bad[0], lambda: tf.constant(0, tf.int64))
    return (tf.where(valid, ids, tf.zeros_like(ids)), tf.cast(has_bad, tf.int64), first_bad)


def _assert_ids(headers, tables, ctx):
    """Every rank raises InvalidArgumentError if any rank had a bad id;
    ``headers[p]`` is ``[has_bad, bad_id, table index]`` from rank p."""
    has_bad = headers[:, 0] > 0
    source = tf.argmax(tf.cast(has_bad, tf.int32), output_type=tf.int32)
    which = tf.cast(headers[source, 2], tf.int32)
    names = tf.constant([t.name for t in tables])
    vocabs = tf.constant([t.layout.vocabulary_size for t in tables], tf.int64)
    message = tf.strings.join([
        "DistributedEmbedding '%s': table '" % ctx.layer_name, tf.gather(names, which),
        "' got id ", tf.strings.as_string(headers[source, 1]), " on rank ",
        tf.strings.as_string(source), ", outside its vocabulary [0, ",
        tf.strings.as_string(tf.gather(vocabs, which)),
        ") (TableConfig.vocabulary_size); pass default_row= to map such ids to a row "
        "instead"])
    return tf.debugging.Assert(tf.logical_not(tf.reduce_any(has_bad)), [message],
                               summarize=1)


def _exclusive_cumsum(x):
    return tf.cumsum(x, exclusive=True)


def lookup_group(tables, ctx):
    """The rows of every table's ids ([len(ids), dim] each, in the order of
    ``tables``). The tables have one width and dtype: their ids travel in one
    alltoall and their rows in another."""
    checked = [check_ids(t) for t in tables]
    if ctx.size == 1:
        out = []
        for t, (ids, has_bad, first_bad) in zip(tables, checked):
            if t.default_row is None:
                header = tf.reshape(tf.stack([has_bad, first_bad, 0]), [1, 3])
                with tf.control_dependencies([_assert_ids(header, [t], ctx)]):
                    ids = tf.identity(ids)
            out.append(tf.gather(t.shard, ids))
        return out
    n, count = ctx.size, len(tables)
    plans = []
    for t, (ids, _, _) in zip(tables, checked):
        unique, position = tf.unique(ids)
        owner, _ = t.layout.locate(unique, tf)
        order = tf.argsort(owner, stable=True)
        counts = tf.math.bincount(tf.cast(owner, tf.int32), minlength=n, maxlength=n,
                                  dtype=tf.int32)
        plans.append((tf.gather(unique, order), tf.gather(owner, order), order, counts,
                      position))
    counts = tf.stack([p[3] for p in plans])                        # [tables, n]
    has_bad = tf.stack([c[1] for c in checked])
    first_bad = tf.stack([c[2] for c in checked])
    which = tf.argmax(has_bad, output_type=tf.int64)
    common = tf.stack([tf.reduce_max(has_bad), tf.gather(first_bad, which), which])
    parts = [tf.split(p[0], p[3], num=n) for p in plans]
    pieces = []
    for dest in range(n):
        pieces.append(common)
        pieces.append(tf.cast(counts[:, dest], tf.int64))
        pieces.extend(parts[k][dest] for k in range(count))
    head = 3 + count
    received, received_splits = ops.alltoall(
        tf.concat(pieces, 0), splits=tf.reduce_sum(counts, 0) + head,
        name=ctx.collective_name("ids"), ignore_name_scope=True)
    from_ranks = tf.split(received, received_splits, num=n)
    headers = tf.stack([r[:head] for r in from_ranks])
    checks = [] if all(t.default_row is not None for t in tables) else [
        _assert_ids(headers[:, :3], tables, ctx)]
    wanted = tf.cast(headers[:, 3:], tf.int32)                       # [n, tables]
    rows = []
    with tf.control_dependencies(checks):
        for source in range(n):
            segments = tf.split(from_ranks[source][head:], wanted[source], num=count)
            for t, segment in zip(tables, segments):
                _, local = t.layout.locate(segment, tf)
                rows.append(tf.gather(t.shard, local))
    rows = _scale_gradient(tf.concat(rows, 0), 1.0 / n)
    back, _ = ops.alltoall(rows, splits=received_splits - head,
                           name=ctx.collective_name("rows"), ignore_name_scope=True)
    # back holds, for each rank p in turn, the rows of every table it sent us
    starts = tf.reshape(_exclusive_cumsum(tf.reshape(tf.transpose(counts), [-1])),
                        [n, count])
    out = []
    for k, (_, owner_sorted, order, table_counts, position) in enumerate(plans):
        owner_sorted = tf.cast(owner_sorted, tf.int32)
        within = tf.range(tf.shape(owner_sorted)[0]) - tf.gather(
            _exclusive_cumsum(table_counts), owner_sorted)
        sorted_rows = tf.gather(back, tf.gather(starts[:, k], owner_sorted) + within)
        unique_rows = tf.gather(sorted_rows, tf.math.invert_permutation(order))
        out.append(tf.gather(unique_rows, position))
    return out

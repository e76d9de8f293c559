"""The reductions: allreduce, grouped_allreduce, reducescatter and their grouped form.

Each checks its arguments as Horovod does (the reduce op, the deprecated ``average``,
Adasum's power-of-two ranks, the IndexedSlices limits), compresses, runs one raw op
(tf_hvd.ops.raw) and decompresses::

    hvd.allreduce(x, op=hvd.Sum)
    block = hvd.reducescatter(tf.ones([hvd.size() * 2, 3]))
"""

import warnings

import tensorflow as tf

from tf_hvd.compression import Compression, CompressionError
from tf_hvd.ops.naming import sub_name
from tf_hvd.ops.raw import (raw_allgather, raw_allreduce, raw_grouped_allreduce,
                            raw_reducescatter)
from tf_hvd.process_sets import registered_set_id, set_rank_size
from tf_hvd.reduce_ops import REDUCE_OP_NAMES, Adasum, Average, Max, Min, Product, Sum
from tf_hvd.topology import check_initialized, size

_VALID_REDUCE_OPS = (Average, Sum, Adasum, Min, Max, Product)


def handle_average_backwards_compatibility(op, average):
    """Horovod's helper: the reduce op meant by ``op`` and the deprecated ``average``.

    ``op`` wins; ``average=True/False`` means Average/Sum (with a
    DeprecationWarning); neither means Average. Passing both raises ValueError::

        hvd.handle_average_backwards_compatibility(None, False) == hvd.Sum
    """
    return _resolve_op(op, average)


def check_num_rank_power_of_2(num_rank):
    """True if ``num_rank`` is a power of two (Horovod's Adasum precondition)."""
    num_rank = int(num_rank)
    return num_rank > 0 and (num_rank & (num_rank - 1)) == 0


def _resolve_op(op, average, default=Average):
    """Combines the deprecated ``average`` flag with ``op`` as Horovod does."""
    if op is not None and average is not None:
        raise ValueError("The op parameter supersedes average; pass only one of them.")
    if average is not None:
        warnings.warn("Parameter `average` has been replaced with `op` and will be "
                      "removed; use op=hvd.Average or op=hvd.Sum.", DeprecationWarning,
                      stacklevel=3)
        return Average if average else Sum
    if op is None:
        return default
    op = int(op)
    if op not in _VALID_REDUCE_OPS:
        raise ValueError("Unknown reduce op %r; use hvd.Average, hvd.Sum, hvd.Adasum, "
                         "hvd.Min, hvd.Max or hvd.Product." % (op,))
    return op


def _check_adasum_size():
    """Adasum pairs ranks level by level: it needs 1, 2, 4, 8, ... ranks (as Horovod)."""
    n = size()
    if n & (n - 1):
        raise NotImplementedError(
            "Adasum needs a power-of-two number of ranks (1, 2, 4, 8, ...); this job has "
            "%d" % n)


def _compress(compression, tensor, name):
    """compression.compress(tensor), its refusal naming the tensor."""
    try:
        return compression.compress(tensor)
    except CompressionError as e:
        if name is None:
            name = getattr(tensor, "name", None) if not tf.executing_eagerly() else None
        what = ("tensor '%s'" % name) if name else (
            "an unnamed tensor of shape %s" % tensor.shape.as_list())
        raise CompressionError("%s: %s" % (what, e)) from None


# ---------------------------------------------------------------------------
# Public collectives


def allreduce(tensor, average=None, device_dense="", device_sparse="",
              compression=Compression.none, op=None, prescale_factor=1.0,
              postscale_factor=1.0, name=None, process_set=None, ignore_name_scope=False):
    """Reduces a tensor over all processes; every process gets the result.

    Args:
      tensor: a tf.Tensor (same shape and dtype on every rank), or a
        tf.IndexedSlices (rows may differ per rank).
      average: deprecated; use ``op``.
      device_dense, device_sparse: devices for the dense and sparse paths.
      compression: ``Compression.none``, ``Compression.fp16`` or ``Compression.bf16``
        (dense only); bf16 refuses integer tensors (CompressionError, a TypeError).
      op: hvd.Average (default), hvd.Sum, hvd.Min, hvd.Max, hvd.Product or
        hvd.Adasum. Average of integer tensors truncates toward zero.
      prescale_factor, postscale_factor: multiply each input before, and the
        result after, the reduction. As in Horovod, integer tensors are
        multiplied in float64 and float16 ones in float32, element by element,
        then converted back (integers truncate toward zero); Average is a sum
        multiplied by ``postscale_factor / size()``.
      name: the collective's name (see module docstring).
      process_set: the hvd.ProcessSet whose ranks take part (default: every
        rank); the other ranks must not call it.
      ignore_name_scope: drop the graph name scope from the tensor name.

    Returns:
      A tensor like ``tensor`` holding the reduction. For tf.IndexedSlices
      (Sum or Average only) the result is a tf.IndexedSlices whose values and
      indices are the concatenation of every rank's (two allgathers), the values
      divided by size() for Average (with ``/``, as in Horovod: integer values
      become floating point, e.g. int32 -> float64); duplicate indices are
      summed when it is converted to a dense tensor.

    Raises:
      NotImplementedError: tf.IndexedSlices with an op other than Sum and
        Average, or with prescale_factor/postscale_factor (as Horovod).

    Example:

    ```pycon
    >>> hvd.init()
    >>> x = tf.constant([1.0, 2.0]) * (hvd.rank() + 1)
    >>> hvd.allreduce(x, op=hvd.Sum).numpy().tolist()   # 2 ranks: [3.0, 6.0]
    [1.0, 2.0]
    >>> hvd.allreduce(x).numpy().tolist()               # Average; 2 ranks: [1.5, 3.0]
    [1.0, 2.0]

    ```
    """
    check_initialized()
    set_id = registered_set_id(process_set)
    op = _resolve_op(op, average)
    if isinstance(tensor, tf.IndexedSlices):
        return _allreduce_indexed_slices(tensor, device_sparse, op, prescale_factor,
                                         postscale_factor, name, ignore_name_scope, set_id)
    if op == Adasum:
        _check_adasum_size()
    with tf.device(device_dense):
        tensor = tf.convert_to_tensor(tensor)
        compressed, ctx = _compress(compression, tensor, name)
        reduced = raw_allreduce(compressed, name=name, op=op, prescale_factor=prescale_factor,
                                postscale_factor=postscale_factor,
                                ignore_name_scope=ignore_name_scope, process_set_id=set_id)
        return compression.decompress(reduced, ctx)


def _allreduce_indexed_slices(slices, device, op, prescale_factor, postscale_factor, name,
                              ignore_name_scope, process_set_id=0):
    # The same NotImplementedErrors as Horovod, raised before anything is sent.
    if op == Adasum:
        raise NotImplementedError("Adasum does not support tf.IndexedSlices (sparse "
                                  "gradients); densify them (sparse_as_dense=True) or use "
                                  "op=hvd.Average.")
    if op not in (Sum, Average):
        raise NotImplementedError("allreduce of tf.IndexedSlices supports only hvd.Sum and "
                                  "hvd.Average (got %s)." % REDUCE_OP_NAMES[op])
    if float(prescale_factor) != 1.0 or float(postscale_factor) != 1.0:
        raise NotImplementedError("prescale_factor/postscale_factor are not supported with "
                                  "tf.IndexedSlices (got %r, %r); scale the values instead."
                                  % (prescale_factor, postscale_factor))
    with tf.device(device):
        values = raw_allgather(slices.values, name=sub_name(name, "values"),
                               ignore_name_scope=ignore_name_scope, process_set_id=process_set_id)
        indices = raw_allgather(slices.indices, name=sub_name(name, "indices"),
                                ignore_name_scope=ignore_name_scope, process_set_id=process_set_id)
        if op == Average:
            # True division as in Horovod: int32/int64 values become float64,
            # 8- and 16-bit integers float32.
            members = set_rank_size(process_set_id)[1]
            values = values / tf.cast(members, values.dtype)
    return tf.IndexedSlices(values, indices, dense_shape=slices.dense_shape)


def grouped_allreduce(tensors, average=None, device_dense="", device_sparse="",
                      compression=Compression.none, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=None, ignore_name_scope=False,
                      name=None):
    """Reduces a list of tensors as one group: negotiated and run together.

    The dense tensors (named ``<name>_<i>``) run only once every rank has
    submitted all of them, fused together (per dtype, up to
    HOROVOD_FUSION_THRESHOLD); if one of them mismatches across ranks, the
    whole group fails on every rank with one FailedPreconditionError naming
    the group, the tensor and what differed, and none of them runs.

    Same arguments as :func:`allreduce`; returns a list in the order of
    ``tensors``. tf.IndexedSlices members are reduced as in allreduce.

    Example::

        a, b = hvd.grouped_allreduce([tf.ones([2]), tf.zeros([3], tf.int32)], op=hvd.Sum)
    """
    check_initialized()
    set_id = registered_set_id(process_set)
    op = _resolve_op(op, average)
    tensors = list(tensors)
    if not tensors:
        return []
    results = [None] * len(tensors)
    dense_idx = []
    for i, t in enumerate(tensors):
        if isinstance(t, tf.IndexedSlices):
            results[i] = _allreduce_indexed_slices(
                t, device_sparse, op, prescale_factor, postscale_factor,
                sub_name(name, i), ignore_name_scope, set_id)
        else:
            dense_idx.append(i)
    if dense_idx:
        with tf.device(device_dense):
            compressed, ctxs = [], []
            for i in dense_idx:
                c, ctx = _compress(compression, tf.convert_to_tensor(tensors[i]),
                                   sub_name(name, i))
                compressed.append(c)
                ctxs.append(ctx)
            reduced = raw_grouped_allreduce(compressed, name=name, op=op,
                                            prescale_factor=prescale_factor,
                                            postscale_factor=postscale_factor,
                                            ignore_name_scope=ignore_name_scope,
                                            process_set_id=set_id)
            for i, r, ctx in zip(dense_idx, reduced, ctxs):
                results[i] = compression.decompress(r, ctx)
    return results


def reducescatter(tensor, device_dense="", compression=Compression.none, op=Average,
                  name=None, process_set=None, ignore_name_scope=False,
                  prescale_factor=1.0, postscale_factor=1.0):
    """Reduces ``tensor`` over all ranks and gives each rank a block of rows.

    Rank r gets ``dim0 // size()`` rows, one more if ``r < dim0 % size()``,
    in rank order. ``op`` is hvd.Average (default) or hvd.Sum; the scale
    factors work as in :func:`allreduce`::

        block = hvd.reducescatter(tf.ones([hvd.size() * 2, 3]), op=hvd.Sum)
    """
    check_initialized()
    set_id = registered_set_id(process_set)
    op = _resolve_op(op, None)
    if op not in (Sum, Average):
        raise ValueError("reducescatter supports only hvd.Sum and hvd.Average (got %s)."
                         % REDUCE_OP_NAMES[op])
    with tf.device(device_dense):
        tensor = tf.convert_to_tensor(tensor)
        compressed, ctx = _compress(compression, tensor, name)
        reduced = raw_reducescatter(compressed, name=name, op=op,
                                    prescale_factor=prescale_factor,
                                    postscale_factor=postscale_factor,
                                    ignore_name_scope=ignore_name_scope, process_set_id=set_id)
        return compression.decompress(reduced, ctx)


def grouped_reducescatter(tensors, device_dense="", compression=Compression.none, op=Average,
                          process_set=None, prescale_factor=1.0, postscale_factor=1.0,
                          name=None, ignore_name_scope=False):
    """reducescatter of each tensor of a list (``<name>_<i>`` when named).

    Horovod's parameters in Horovod's order; ``name`` and ``ignore_name_scope``
    are tf_hvd additions.
    """
    return [reducescatter(t, device_dense=device_dense, compression=compression, op=op,
                          name=sub_name(name, i), prescale_factor=prescale_factor,
                          postscale_factor=postscale_factor,
                          ignore_name_scope=ignore_name_scope, process_set=process_set)
            for i, t in enumerate(tensors)]

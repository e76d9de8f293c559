"""Collective operations on tf.Tensor (and tf.IndexedSlices) and their gradients.

Every function here works eagerly, inside ``tf.function`` and in TF1 graph
mode. A collective is matched across processes by its *tensor name*:

* ``name`` given: it is the op's name in a graph (so, with TensorFlow's name
  scope, ``scope/name``; pass ``ignore_name_scope=True`` to drop the scope) and
  the tensor name when executing eagerly.
* ``name`` omitted: in a graph the op is named ``<OpType>_<input tensor name>``
  (e.g. ``HorovodAllreduce_dense_kernel_0``); eagerly the tensor name is the
  kind, ``<kind>.noname`` (e.g. ``allreduce.noname``), whatever ran before.

Several collectives may be in flight under one name on a rank: they queue in
submission order and the k-th of a name on one rank is matched with the k-th
of that name on every other rank. So unnamed eager calls stay in step even
after one rank issued an extra call that failed on that rank alone, and
repeated calls with the same shape reuse the negotiated plan (the response
cache); a call with another shape under the same name is renegotiated::

    hvd.allreduce(tf.ones([4]))         # "allreduce.noname" on every rank
    try:
        hvd.allreduce(bad_tensor)       # raises on this rank only
    except tf.errors.FailedPreconditionError:
        pass
    hvd.allreduce(tf.ones([4]))         # still meets the other ranks' next call

Calls with the same name from several threads of one rank are matched in the
order they reach the core, which threads do not fix: give those distinct
names.

Every collective raises ``ValueError("Horovod has not been initialized; use
hvd.init().")`` if called before ``hvd.init()``. Mismatched submissions across
ranks (dtype, shape, op, root rank, ...) fail on every rank with
``tf.errors.FailedPreconditionError`` (as in Horovod) naming the tensor and
what each rank sent. Arguments that are wrong on this rank alone (alltoall
splits that do not add up, a scalar given to allgather) raise
``tf.errors.InvalidArgumentError``.
"""

import re
import warnings

import tensorflow as tf

from tf_hvd._library import op_lib as _op_lib
from tf_hvd.compression import Compression, CompressionError
from tf_hvd.process_sets import _process_set_id, _set_rank_size
from tf_hvd.reduce_ops import REDUCE_OP_NAMES, Adasum, Average, Max, Min, Product, Sum
from tf_hvd.topology import _check_initialized, rank, size

_VALID_REDUCE_OPS = (Average, Sum, Adasum, Min, Max, Product)

# ---------------------------------------------------------------------------
# Naming


_NOT_NAME_CHARS = re.compile(r"[^A-Za-z0-9_]")


def _normalize_name(name):
    """Turns a tensor name like ``dense/kernel:0`` into ``dense_kernel_0``."""
    return _NOT_NAME_CHARS.sub("_", name)


def _noname(kind):
    """The tensor name of an unnamed eager collective of ``kind``.

    It does not depend on how many collectives ran before, so ranks stay in
    step and the response cache hits: ``_noname("allreduce") == "allreduce.noname"``.
    """
    return "%s.noname" % kind


def _tensor_label(tensor):
    try:
        return _normalize_name(tensor.name)
    except (AttributeError, ValueError):
        # An EagerTensor captured into a graph has no graph name.
        return "tensor"


def _names(kind, op_type, name, tensor=None):
    """Returns (op name for the graph, tensor_name attr) following the naming rule."""
    if tf.executing_eagerly():
        if name is None:
            return None, _noname(kind)
        return None, str(name)
    if name is None:
        if tensor is None:
            return op_type, ""
        return "%s_%s" % (op_type, _tensor_label(tensor)), ""
    return str(name), ""


def in_xla_function():
    """True while tracing a function that XLA compiles (tf.function(jit_compile=True),
    Keras' jit_compile)."""
    if tf.executing_eagerly():
        return False
    try:
        from tensorflow.python.ops import control_flow_util
    except ImportError:  # pragma: no cover - private module moved
        return False
    return control_flow_util.GraphOrParentsInXlaContext(
        tf.compat.v1.get_default_graph())


# The ops that have XLA kernels (cc/tensorflow/xla/xla_kernels.cc).
XLA_OPS = ("HorovodAllreduce", "HorovodGroupedAllreduce", "HorovodAllgather",
           "HorovodBroadcast")


def _check_not_xla(op_type):
    """Ops without an XLA kernel stop at trace time, naming the op, instead of
    failing later in XLA's compiler with a long list of unsupported nodes."""
    if in_xla_function():
        raise NotImplementedError(
            "%s has no XLA kernel and cannot run inside an XLA-compiled function "
            "(tf.function(jit_compile=True), Keras jit_compile=True); inside XLA "
            "tf_hvd supports %s. Call it outside the compiled function." % (
                op_type, ", ".join(XLA_OPS)))


def _sub_name(name, suffix):
    return None if name is None else "%s_%s" % (name, suffix)


# ---------------------------------------------------------------------------
# Argument checks


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


def _check_process_set(process_set):
    """The id of ``process_set`` (None: the global set, 0); ValueError if unregistered."""
    return _process_set_id(process_set)


# ---------------------------------------------------------------------------
# Thin wrappers of the ops (one op each, no compression)


def _allreduce(tensor, name=None, op=Sum, prescale_factor=1.0, postscale_factor=1.0,
               ignore_name_scope=False, process_set_id=0):
    """One HorovodAllreduce op: reduces ``tensor`` (same shape/dtype on every rank)."""
    _check_initialized()
    tensor = tf.convert_to_tensor(tensor)
    op_name, tensor_name = _names("allreduce", "HorovodAllreduce", name, tensor)
    return _op_lib.horovod_allreduce(
        tensor, reduce_op=int(op), prescale_factor=float(prescale_factor),
        postscale_factor=float(postscale_factor), ignore_name_scope=bool(ignore_name_scope),
        tensor_name=tensor_name, process_set_id=int(process_set_id), name=op_name)


def _grouped_allreduce(tensors, name=None, op=Sum, prescale_factor=1.0,
                       postscale_factor=1.0, ignore_name_scope=False, process_set_id=0):
    """One HorovodGroupedAllreduce op: all ``tensors`` are reduced together."""
    _check_initialized()
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    op_name, tensor_name = _names("grouped_allreduce", "HorovodGroupedAllreduce", name,
                                  tensors[0])
    return list(_op_lib.horovod_grouped_allreduce(
        tensors, reduce_op=int(op), prescale_factor=float(prescale_factor),
        postscale_factor=float(postscale_factor), ignore_name_scope=bool(ignore_name_scope),
        tensor_name=tensor_name, process_set_id=int(process_set_id), name=op_name))


def _allgather(tensor, name=None, ignore_name_scope=False, process_set_id=0):
    _check_initialized()
    tensor = tf.convert_to_tensor(tensor)
    op_name, tensor_name = _names("allgather", "HorovodAllgather", name, tensor)
    return _op_lib.horovod_allgather(
        tensor, ignore_name_scope=bool(ignore_name_scope), tensor_name=tensor_name,
        process_set_id=int(process_set_id), name=op_name)


def _broadcast(tensor, root_rank, name=None, ignore_name_scope=False, process_set_id=0,
               require_init=True):
    # require_init=False: a TF1 graph op built before hvd.init() (it needs init to run).
    if require_init:
        _check_initialized()
    tensor = tf.convert_to_tensor(tensor)
    op_name, tensor_name = _names("broadcast", "HorovodBroadcast", name, tensor)
    return _op_lib.horovod_broadcast(
        tensor, root_rank=int(root_rank), ignore_name_scope=bool(ignore_name_scope),
        tensor_name=tensor_name, process_set_id=int(process_set_id), name=op_name)


def _alltoall(tensor, splits=None, name=None, ignore_name_scope=False, process_set_id=0):
    _check_initialized()
    _check_not_xla("HorovodAlltoall")
    tensor = tf.convert_to_tensor(tensor)
    if splits is None:
        splits = tf.zeros([0], dtype=tf.int32)
    else:
        splits = tf.convert_to_tensor(splits)
        if splits.dtype != tf.int32:
            splits = tf.cast(splits, tf.int32)
    op_name, tensor_name = _names("alltoall", "HorovodAlltoall", name, tensor)
    result = _op_lib.horovod_alltoall(
        tensor, splits, ignore_name_scope=bool(ignore_name_scope), tensor_name=tensor_name,
        process_set_id=int(process_set_id), name=op_name)
    return result[0], result[1]


def _reducescatter(tensor, name=None, op=Sum, prescale_factor=1.0, postscale_factor=1.0,
                   ignore_name_scope=False, process_set_id=0):
    _check_initialized()
    _check_not_xla("HorovodReducescatter")
    tensor = tf.convert_to_tensor(tensor)
    op_name, tensor_name = _names("reducescatter", "HorovodReducescatter", name, tensor)
    return _op_lib.horovod_reducescatter(
        tensor, reduce_op=int(op), prescale_factor=float(prescale_factor),
        postscale_factor=float(postscale_factor), ignore_name_scope=bool(ignore_name_scope),
        tensor_name=tensor_name, process_set_id=int(process_set_id), name=op_name)


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
    _check_initialized()
    set_id = _check_process_set(process_set)
    op = _resolve_op(op, average)
    if isinstance(tensor, tf.IndexedSlices):
        return _allreduce_indexed_slices(tensor, device_sparse, op, prescale_factor,
                                         postscale_factor, name, ignore_name_scope, set_id)
    if op == Adasum:
        _check_adasum_size()
    with tf.device(device_dense):
        tensor = tf.convert_to_tensor(tensor)
        compressed, ctx = _compress(compression, tensor, name)
        reduced = _allreduce(compressed, name=name, op=op, prescale_factor=prescale_factor,
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
        values = _allgather(slices.values, name=_sub_name(name, "values"),
                            ignore_name_scope=ignore_name_scope, process_set_id=process_set_id)
        indices = _allgather(slices.indices, name=_sub_name(name, "indices"),
                             ignore_name_scope=ignore_name_scope, process_set_id=process_set_id)
        if op == Average:
            # True division as in Horovod: int32/int64 values become float64,
            # 8- and 16-bit integers float32.
            members = _set_rank_size(process_set_id)[1]
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
    _check_initialized()
    set_id = _check_process_set(process_set)
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
                _sub_name(name, i), ignore_name_scope, set_id)
        else:
            dense_idx.append(i)
    if dense_idx:
        with tf.device(device_dense):
            compressed, ctxs = [], []
            for i in dense_idx:
                c, ctx = _compress(compression, tf.convert_to_tensor(tensors[i]),
                                   _sub_name(name, i))
                compressed.append(c)
                ctxs.append(ctx)
            reduced = _grouped_allreduce(compressed, name=name, op=op,
                                         prescale_factor=prescale_factor,
                                         postscale_factor=postscale_factor,
                                         ignore_name_scope=ignore_name_scope,
                                         process_set_id=set_id)
            for i, r, ctx in zip(dense_idx, reduced, ctxs):
                results[i] = compression.decompress(r, ctx)
    return results


def allgather(tensor, name=None, ignore_name_scope=False, process_set=None):
    """Concatenates every rank's tensor along dimension 0, in rank order.

    Dimension 0 may differ per rank (and may be 0); the other dimensions and
    the dtype must agree. bool tensors are supported.

    Example:

    ```pycon
    >>> hvd.init()
    >>> rows = tf.fill([hvd.rank() + 1, 2], float(hvd.rank()))  # rank r: r + 1 rows
    >>> hvd.allgather(rows).numpy().tolist()   # 2 ranks: [[0., 0.], [1., 1.], [1., 1.]]
    [[0.0, 0.0]]

    ```
    """
    _check_initialized()
    return _allgather(tensor, name=name, ignore_name_scope=ignore_name_scope,
                      process_set_id=_check_process_set(process_set))


def grouped_allgather(tensors, name=None, ignore_name_scope=False, process_set=None):
    """allgather of each tensor of a list (``<name>_<i>`` when named)."""
    _check_initialized()
    set_id = _check_process_set(process_set)
    return [_allgather(t, name=_sub_name(name, i), ignore_name_scope=ignore_name_scope,
                       process_set_id=set_id)
            for i, t in enumerate(tensors)]


def broadcast(tensor, root_rank, name=None, ignore_name_scope=False, process_set=None):
    """Returns ``root_rank``'s tensor on every rank (shape and dtype must agree).

    With ``process_set``, ``root_rank`` is still a global rank (a member).

    Example:

    >>> hvd.init()
    >>> mine = tf.constant([float(hvd.rank())] * 2)
    >>> hvd.broadcast(mine, root_rank=0).numpy().tolist()   # rank 0's on every rank
    [0.0, 0.0]
    """
    _check_initialized()
    return _broadcast(tensor, root_rank, name=name, ignore_name_scope=ignore_name_scope,
                      process_set_id=_check_process_set(process_set))


def alltoall(tensor, splits=None, name=None, ignore_name_scope=False, process_set=None):
    """Scatters slices of ``tensor`` to every rank and gathers what they sent.

    Rank r sends rows ``[sum(splits[:p]), sum(splits[:p+1]))`` of ``tensor`` to
    rank p. Without ``splits`` dimension 0 is split evenly (it must divide by
    size()).

    Returns:
      As in Horovod: without ``splits``, the rows received, concatenated in
      rank order; with ``splits``, ``(output, received_splits)``, the latter an
      int32 vector of how many rows came from each rank::

          out = hvd.alltoall(tf.range(hvd.size() * 2))
          out, received = hvd.alltoall(x, splits=[1] * hvd.size())
    """
    _check_initialized()
    output, received_splits = _alltoall(tensor, splits=splits, name=name,
                                        ignore_name_scope=ignore_name_scope,
                                        process_set_id=_check_process_set(process_set))
    if splits is None:
        return output
    return output, received_splits


def reducescatter(tensor, device_dense="", compression=Compression.none, op=Average,
                  name=None, process_set=None, ignore_name_scope=False,
                  prescale_factor=1.0, postscale_factor=1.0):
    """Reduces ``tensor`` over all ranks and gives each rank a block of rows.

    Rank r gets ``dim0 // size()`` rows, one more if ``r < dim0 % size()``,
    in rank order. ``op`` is hvd.Average (default) or hvd.Sum; the scale
    factors work as in :func:`allreduce`::

        block = hvd.reducescatter(tf.ones([hvd.size() * 2, 3]), op=hvd.Sum)
    """
    _check_initialized()
    set_id = _check_process_set(process_set)
    op = _resolve_op(op, None)
    if op not in (Sum, Average):
        raise ValueError("reducescatter supports only hvd.Sum and hvd.Average (got %s)."
                         % REDUCE_OP_NAMES[op])
    with tf.device(device_dense):
        tensor = tf.convert_to_tensor(tensor)
        compressed, ctx = _compress(compression, tensor, name)
        reduced = _reducescatter(compressed, name=name, op=op,
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
                          name=_sub_name(name, i), prescale_factor=prescale_factor,
                          postscale_factor=postscale_factor,
                          ignore_name_scope=ignore_name_scope, process_set=process_set)
            for i, t in enumerate(tensors)]


def join(name=None, process_set=None):
    """Marks this rank as done: until every rank (of ``process_set``) has
    joined, it takes part in other ranks' allreduces with zeros. Returns
    (int32 scalar) the rank that joined last (its rank within the set)."""
    _check_initialized()
    _check_not_xla("HorovodJoin")
    set_id = _check_process_set(process_set)
    op_name, tensor_name = _names("join", "HorovodJoin", name)
    return _op_lib.horovod_join(tensor_name=tensor_name, process_set_id=set_id, name=op_name)


def barrier(name=None, process_set=None):
    """Blocks until every rank (of ``process_set``) reaches the barrier (eager);
    returns the op in a graph."""
    _check_initialized()
    _check_not_xla("HorovodBarrier")
    set_id = _check_process_set(process_set)
    op_name, tensor_name = _names("barrier", "HorovodBarrier", name)
    return _op_lib.horovod_barrier(tensor_name=tensor_name, process_set_id=set_id,
                                   name=op_name)


def size_op(process_set_id=0, name=None):
    """An op returning size() (int32 scalar) when run; with ``process_set_id``
    the number of ranks in that process set."""
    _check_initialized()
    return _op_lib.horovod_size(process_set_id=int(process_set_id), name=name)


def process_set_included_op(process_set_id=0, name=None):
    """An op returning 1 (int32 scalar) when run if this process belongs to
    the process set ``process_set_id``, else 0 (as Horovod)::

        included = hvd.process_set_included_op(ps.process_set_id)
    """
    _check_initialized()
    try:
        included = 1 if _set_rank_size(int(process_set_id)) else 0
    except ValueError:
        included = 0
    # Derived from the rank op, so that it is evaluated when the graph runs.
    with tf.name_scope(name or "HorovodProcessSetIncluded"):
        return tf.cast(tf.greater_equal(_op_lib.horovod_rank(), 0), tf.int32) * included


def rank_op(name=None):
    """An op returning rank() (int32 scalar) when run."""
    _check_initialized()
    return _op_lib.horovod_rank(name=name)


def local_size_op(name=None):
    """An op returning local_size() (int32 scalar) when run."""
    _check_initialized()
    return _op_lib.horovod_local_size(name=name)


def local_rank_op(name=None):
    """An op returning local_rank() (int32 scalar) when run."""
    _check_initialized()
    return _op_lib.horovod_local_rank(name=name)


# ---------------------------------------------------------------------------
# Gradients: Horovod 0.28's definitions, so that a ported model gets Horovod's
# numbers (g is the incoming gradient on each rank, n = size()):
#   allreduce (Sum, Average, Adasum), grouped allreduce:
#                  the same allreduce of g, with the same op and scale factors
#   allgather:     allreduce(g, Average), then this rank's rows
#   broadcast:     allreduce(g, Average) on the root, zeros elsewhere
#   alltoall:      alltoall(g) back with the received splits
#   reducescatter: allgather(g), times n for Sum (and, a tf_hvd addition,
#                  times prescale * postscale when they are not 1)
# Min, Max and Product are where tf_hvd differs on purpose: Horovod
# differentiates them as allreduce(g, same op), which is not a derivative;
# here they get the derivative of the sum of every rank's loss (see
# _extremum_or_product_grad).
#
# In a graph, the collectives of a gradient are named after the forward op
# (``<forward op name>_grad[_<part>]``), not after their input tensors: the
# gradient graph TensorFlow builds upstream may differ between ranks (e.g. the
# gradient of a broadcasting multiply depends on static shapes that differ per
# rank), while the forward op's name is the same on every rank. Eagerly the
# usual per-kind counters apply.


def _grad_name(op, part=None):
    if tf.executing_eagerly():
        return None
    # Under tf.GradientTape ``op`` is a stand-in without a name; its outputs
    # are the forward op's graph tensors.
    forward = op if isinstance(op, tf.Operation) else None
    if forward is None:
        for t in getattr(op, "outputs", ()):
            forward = getattr(t, "op", None)
            if isinstance(forward, tf.Operation):
                break
            forward = None
    if forward is None:
        return None
    base = "%s_grad" % _normalize_name(forward.name)
    return base if part is None else "%s_%s" % (base, part)


def _set_id(op):
    try:
        return int(op.get_attr("process_set_id"))
    except ValueError:
        return 0


def _attrs(op):
    return dict(op=op.get_attr("reduce_op"), prescale_factor=op.get_attr("prescale_factor"),
                postscale_factor=op.get_attr("postscale_factor"),
                ignore_name_scope=op.get_attr("ignore_name_scope"),
                process_set_id=_set_id(op))


def _extremum_or_product_grad(fwd, x, grad, attrs, part):
    """Gradient of y = post * R_q(pre * x_q) for R in Min, Max, Product."""
    reduce_op = attrs["op"]
    pre, post = attrs["prescale_factor"], attrs["postscale_factor"]
    ign = attrs["ignore_name_scope"]
    ps = attrs["process_set_id"]

    def name(what):
        return _grad_name(fwd, what if part is None else "%s_%s" % (part, what))
    summed = _allreduce(grad, op=Sum, ignore_name_scope=ign, name=name("sum"), process_set_id=ps)
    if reduce_op in (Min, Max):
        scaled = x * tf.cast(pre, x.dtype)
        extreme = _allreduce(scaled, op=reduce_op, ignore_name_scope=ign, name=name("extreme"),
                             process_set_id=ps)
        hit = tf.cast(tf.equal(scaled, extreme), grad.dtype)
        # Ties share the gradient equally, as tf.reduce_max does.
        ties = _allreduce(hit, op=Sum, ignore_name_scope=ign, name=name("ties"),
                          process_set_id=ps)
        return summed * hit / tf.maximum(ties, tf.ones_like(ties)) * tf.cast(pre * post,
                                                                          grad.dtype)
    # Product: dy/dx_q = post * pre**n * prod_{p != q} x_p, from every rank's x.
    everyone = _allgather(tf.expand_dims(x, 0), ignore_name_scope=ign, name=name("inputs"),
                          process_set_id=ps)
    me, members = _set_rank_size(ps)
    others = (tf.math.cumprod(everyone, axis=0, exclusive=True) *
              tf.math.cumprod(everyone, axis=0, exclusive=True, reverse=True))[me]
    return summed * others * tf.cast(post * pre ** members, grad.dtype)


@tf.RegisterGradient("HorovodAllreduce")
def _allreduce_grad(op, grad):
    attrs = _attrs(op)
    if attrs["op"] in (Sum, Average, Adasum):
        return _allreduce(grad, name=_grad_name(op), **attrs)
    return _extremum_or_product_grad(op, op.inputs[0], grad, attrs, None)


@tf.RegisterGradient("HorovodGroupedAllreduce")
def _grouped_allreduce_grad(op, *grads):
    attrs = _attrs(op)
    grads = [tf.zeros_like(y) if g is None else g for g, y in zip(grads, op.outputs)]
    if attrs["op"] in (Sum, Average, Adasum):
        return _grouped_allreduce(grads, name=_grad_name(op), **attrs)
    return [_extremum_or_product_grad(op, x, g, attrs, str(i))
            for i, (x, g) in enumerate(zip(op.inputs, grads))]


@tf.RegisterGradient("HorovodAllgather")
def _allgather_grad(op, grad):
    ign = op.get_attr("ignore_name_scope")
    ps = _set_id(op)
    averaged = _allreduce(grad, op=Average, ignore_name_scope=ign, name=_grad_name(op),
                          process_set_id=ps)
    rows = tf.shape(op.inputs[0], out_type=tf.int64)[:1]
    every_rows = _allgather(rows, ignore_name_scope=ign, name=_grad_name(op, "rows"),
                            process_set_id=ps)
    me = _set_rank_size(ps)[0]
    offset = tf.reduce_sum(every_rows[:me])
    return averaged[offset:offset + every_rows[me]]


@tf.RegisterGradient("HorovodBroadcast")
def _broadcast_grad(op, grad):
    averaged = _allreduce(grad, op=Average,
                          ignore_name_scope=op.get_attr("ignore_name_scope"),
                          name=_grad_name(op), process_set_id=_set_id(op))
    if rank() != op.get_attr("root_rank"):
        # Multiplied by zero as in Horovod; consuming the allreduce also keeps
        # it from being pruned from a graph on non-root ranks, so every rank
        # takes part.
        return averaged * tf.zeros([], averaged.dtype)
    return averaged


@tf.RegisterGradient("HorovodAlltoall")
def _alltoall_grad(op, grad, unused_grad_received_splits):
    if grad is None:
        grad = tf.zeros_like(op.outputs[0])
    back, _ = _alltoall(grad, splits=op.outputs[1],
                        ignore_name_scope=op.get_attr("ignore_name_scope"),
                        name=_grad_name(op), process_set_id=_set_id(op))
    return [back, None]


@tf.RegisterGradient("HorovodReducescatter")
def _reducescatter_grad(op, grad):
    attrs = _attrs(op)
    factor = attrs["prescale_factor"] * attrs["postscale_factor"]
    if attrs["op"] == Sum:
        factor *= _set_rank_size(attrs["process_set_id"])[1]
    if factor != 1.0:
        grad = grad * tf.cast(factor, grad.dtype)
    return _allgather(grad, ignore_name_scope=attrs["ignore_name_scope"], name=_grad_name(op),
                      process_set_id=attrs["process_set_id"])


for _op_type in ("HorovodJoin", "HorovodBarrier", "HorovodSize", "HorovodRank",
                 "HorovodLocalSize", "HorovodLocalRank"):
    tf.no_gradient(_op_type)
del _op_type

"""The collectives that move data without reducing it: allgather, broadcast, alltoall,
and the synchronisations join and barrier::

    rows = hvd.allgather(x)
    w = hvd.broadcast(w, root_rank=0)
"""

from tf_hvd._library import op_lib as _op_lib
from tf_hvd.ops.naming import check_not_xla, op_names, sub_name
from tf_hvd.ops.raw import raw_allgather, raw_alltoall, raw_broadcast
from tf_hvd.process_sets import registered_set_id
from tf_hvd.topology import check_initialized


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
    check_initialized()
    return raw_allgather(tensor, name=name, ignore_name_scope=ignore_name_scope,
                         process_set_id=registered_set_id(process_set))


def grouped_allgather(tensors, name=None, ignore_name_scope=False, process_set=None):
    """allgather of each tensor of a list (``<name>_<i>`` when named)."""
    check_initialized()
    set_id = registered_set_id(process_set)
    return [raw_allgather(t, name=sub_name(name, i), ignore_name_scope=ignore_name_scope,
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
    check_initialized()
    return raw_broadcast(tensor, root_rank, name=name, ignore_name_scope=ignore_name_scope,
                         process_set_id=registered_set_id(process_set))


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
    check_initialized()
    output, received_splits = raw_alltoall(tensor, splits=splits, name=name,
                                           ignore_name_scope=ignore_name_scope,
                                           process_set_id=registered_set_id(process_set))
    if splits is None:
        return output
    return output, received_splits


def join(name=None, process_set=None):
    """Marks this rank as done: until every rank (of ``process_set``) has
    joined, it takes part in other ranks' allreduces with zeros. Returns
    (int32 scalar) the rank that joined last (its rank within the set)."""
    check_initialized()
    check_not_xla("HorovodJoin")
    set_id = registered_set_id(process_set)
    op_name, tensor_name = op_names("join", "HorovodJoin", name)
    return _op_lib.horovod_join(tensor_name=tensor_name, process_set_id=set_id, name=op_name)


def barrier(name=None, process_set=None):
    """Blocks until every rank (of ``process_set``) reaches the barrier (eager);
    returns the op in a graph."""
    check_initialized()
    check_not_xla("HorovodBarrier")
    set_id = registered_set_id(process_set)
    op_name, tensor_name = op_names("barrier", "HorovodBarrier", name)
    return _op_lib.horovod_barrier(tensor_name=tensor_name, process_set_id=set_id,
                                   name=op_name)

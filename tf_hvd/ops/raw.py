"""The thin wrappers of the native ops: one op each, no compression, no averaging.

Each takes the process set as its id (``process_set_id``, 0 for the global set) and
names the op by tf_hvd.ops.naming's rule. The public collectives (reduce.py,
exchange.py), their gradients (gradients.py), the broadcasts of tf_hvd.functions and
Horovod's ``hvd.mpi_ops._allreduce`` are built on these::

    total = raw_allreduce(tf.ones([3]))            # a sum over every rank
    rows = raw_allgather(x, process_set_id=1)
"""

import tensorflow as tf

from tf_hvd._library import op_lib as _op_lib
from tf_hvd.ops.naming import check_not_xla, op_names
from tf_hvd.process_sets import set_rank_size
from tf_hvd.reduce_ops import Sum
from tf_hvd.topology import check_initialized


def raw_allreduce(tensor, name=None, op=Sum, prescale_factor=1.0, postscale_factor=1.0,
                  ignore_name_scope=False, process_set_id=0):
    """One HorovodAllreduce op: reduces ``tensor`` (same shape/dtype on every rank)."""
    check_initialized()
    tensor = tf.convert_to_tensor(tensor)
    op_name, tensor_name = op_names("allreduce", "HorovodAllreduce", name, tensor)
    return _op_lib.horovod_allreduce(
        tensor, reduce_op=int(op), prescale_factor=float(prescale_factor),
        postscale_factor=float(postscale_factor), ignore_name_scope=bool(ignore_name_scope),
        tensor_name=tensor_name, process_set_id=int(process_set_id), name=op_name)


def raw_grouped_allreduce(tensors, name=None, op=Sum, prescale_factor=1.0,
                          postscale_factor=1.0, ignore_name_scope=False, process_set_id=0):
    """One HorovodGroupedAllreduce op: all ``tensors`` are reduced together."""
    check_initialized()
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    op_name, tensor_name = op_names("grouped_allreduce", "HorovodGroupedAllreduce", name,
                                    tensors[0])
    return list(_op_lib.horovod_grouped_allreduce(
        tensors, reduce_op=int(op), prescale_factor=float(prescale_factor),
        postscale_factor=float(postscale_factor), ignore_name_scope=bool(ignore_name_scope),
        tensor_name=tensor_name, process_set_id=int(process_set_id), name=op_name))


def raw_allgather(tensor, name=None, ignore_name_scope=False, process_set_id=0):
    check_initialized()
    tensor = tf.convert_to_tensor(tensor)
    op_name, tensor_name = op_names("allgather", "HorovodAllgather", name, tensor)
    return _op_lib.horovod_allgather(
        tensor, ignore_name_scope=bool(ignore_name_scope), tensor_name=tensor_name,
        process_set_id=int(process_set_id), name=op_name)


def raw_broadcast(tensor, root_rank, name=None, ignore_name_scope=False, process_set_id=0,
                  require_init=True):
    # require_init=False: a TF1 graph op built before hvd.init() (it needs init to run).
    if require_init:
        check_initialized()
    tensor = tf.convert_to_tensor(tensor)
    op_name, tensor_name = op_names("broadcast", "HorovodBroadcast", name, tensor)
    return _op_lib.horovod_broadcast(
        tensor, root_rank=int(root_rank), ignore_name_scope=bool(ignore_name_scope),
        tensor_name=tensor_name, process_set_id=int(process_set_id), name=op_name)


def raw_alltoall(tensor, splits=None, name=None, ignore_name_scope=False, process_set_id=0):
    check_initialized()
    check_not_xla("HorovodAlltoall")
    tensor = tf.convert_to_tensor(tensor)
    if splits is None:
        splits = tf.zeros([0], dtype=tf.int32)
    else:
        splits = tf.convert_to_tensor(splits)
        if splits.dtype != tf.int32:
            splits = tf.cast(splits, tf.int32)
    op_name, tensor_name = op_names("alltoall", "HorovodAlltoall", name, tensor)
    result = _op_lib.horovod_alltoall(
        tensor, splits, ignore_name_scope=bool(ignore_name_scope), tensor_name=tensor_name,
        process_set_id=int(process_set_id), name=op_name)
    return result[0], result[1]


def raw_reducescatter(tensor, name=None, op=Sum, prescale_factor=1.0, postscale_factor=1.0,
                      ignore_name_scope=False, process_set_id=0):
    check_initialized()
    check_not_xla("HorovodReducescatter")
    tensor = tf.convert_to_tensor(tensor)
    op_name, tensor_name = op_names("reducescatter", "HorovodReducescatter", name, tensor)
    return _op_lib.horovod_reducescatter(
        tensor, reduce_op=int(op), prescale_factor=float(prescale_factor),
        postscale_factor=float(postscale_factor), ignore_name_scope=bool(ignore_name_scope),
        tensor_name=tensor_name, process_set_id=int(process_set_id), name=op_name)


def size_op(process_set_id=0, name=None):
    """An op returning size() (int32 scalar) when run; with ``process_set_id``
    the number of ranks in that process set."""
    check_initialized()
    return _op_lib.horovod_size(process_set_id=int(process_set_id), name=name)


def process_set_included_op(process_set_id=0, name=None):
    """An op returning 1 (int32 scalar) when run if this process belongs to
    the process set ``process_set_id``, else 0 (as Horovod)::

        included = hvd.process_set_included_op(ps.process_set_id)
    """
    check_initialized()
    try:
        included = 1 if set_rank_size(int(process_set_id)) else 0
    except ValueError:
        included = 0
    # Derived from the rank op, so that it is evaluated when the graph runs.
    with tf.name_scope(name or "HorovodProcessSetIncluded"):
        return tf.cast(tf.greater_equal(_op_lib.horovod_rank(), 0), tf.int32) * included


def rank_op(name=None):
    """An op returning rank() (int32 scalar) when run."""
    check_initialized()
    return _op_lib.horovod_rank(name=name)


def local_size_op(name=None):
    """An op returning local_size() (int32 scalar) when run."""
    check_initialized()
    return _op_lib.horovod_local_size(name=name)


def local_rank_op(name=None):
    """An op returning local_rank() (int32 scalar) when run."""
    check_initialized()
    return _op_lib.horovod_local_rank(name=name)

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

The package by job: ``naming`` (the naming rule above, the XLA check), ``raw`` (one
native op per function, by process-set id), ``reduce`` (allreduce, reducescatter and
their grouped forms), ``exchange`` (allgather, broadcast, alltoall, join, barrier) and
``gradients`` (registered with TensorFlow on import). Every name is re-exported here,
as ``tf_hvd.ops.allreduce`` and ``hvd.allreduce`` have always been.
"""

# Importing any submodule runs this file first, so the gradients are registered before
# a collective can be built, whichever submodule a caller imports.
from tf_hvd.ops import gradients  # noqa: F401 (registers the gradients)
from tf_hvd.ops.exchange import (  # noqa: F401 (re-exported)
    allgather, alltoall, barrier, broadcast, grouped_allgather, join)
from tf_hvd.ops.naming import (  # noqa: F401 (re-exported)
    XLA_OPS, check_not_xla, in_xla_function, normalize_name, noname, op_names, sub_name)
from tf_hvd.ops.raw import (  # noqa: F401 (re-exported)
    local_rank_op, local_size_op, process_set_included_op, rank_op, raw_allgather,
    raw_allreduce, raw_alltoall, raw_broadcast, raw_grouped_allreduce, raw_reducescatter,
    size_op)
from tf_hvd.ops.reduce import (  # noqa: F401 (re-exported)
    allreduce, check_num_rank_power_of_2, grouped_allreduce, grouped_reducescatter,
    handle_average_backwards_compatibility, reducescatter)

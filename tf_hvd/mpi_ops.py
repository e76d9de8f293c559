"""Horovod's ``horovod.tensorflow.mpi_ops`` names (``hvd.mpi_ops``), over tf_hvd's ops.

Code written for Horovod reaches past the public API into this module: for the
raw one-op allreduce (``hvd.mpi_ops._allreduce(x)``, a sum with no compression
or averaging), the reduce-op constants (``hvd.mpi_ops.Sum``) and the ops that
Horovod defines only here. Each name keeps Horovod's parameters: the raw ops
take ``process_set=`` (a :class:`ProcessSet`, default the global set), not the
set's id. Nothing here is new behaviour: every name is a tf_hvd function.

Example:

```python
import tf_hvd as hvd            # or: import horovod.tensorflow as hvd
hvd.init()
total = hvd.mpi_ops._allreduce(tf.ones([3]))              # [size, size, size]
ranks = hvd.mpi_ops.allgather(tf.constant([hvd.rank()]))  # [0, 1, ..., size-1]
```
"""

from tf_hvd.basics import init, shutdown
from tf_hvd.functions import broadcast_
from tf_hvd.ops import (allgather, broadcast, check_num_rank_power_of_2, grouped_allgather,
                        handle_average_backwards_compatibility, join, local_rank_op,
                        local_size_op, process_set_included_op, rank_op, size_op)
# Horovod's mpi_ops spells it _normalize_name.
from tf_hvd.ops.naming import normalize_name as _normalize_name, sub_name  # noqa: F401
from tf_hvd.ops.raw import (raw_allreduce, raw_alltoall, raw_grouped_allreduce,
                            raw_reducescatter)
from tf_hvd.process_sets import (ProcessSet, add_process_set, global_process_set,
                                 registered_set_id, remove_process_set)
from tf_hvd.reduce_ops import Adasum, Average, Max, Min, Product, Sum
from tf_hvd.topology import (ccl_built, cross_rank, cross_size, cuda_built, ddl_built,
                             gloo_built, gloo_enabled, is_homogeneous, is_initialized,
                             local_rank, local_size, mpi_built, mpi_enabled,
                             mpi_threads_supported, nccl_built, rank, rocm_built, size,
                             start_timeline, stop_timeline)


def _allreduce(tensor, name=None, op=Sum, prescale_factor=1.0, postscale_factor=1.0,
               ignore_name_scope=False, process_set=global_process_set):
    """One HorovodAllreduce op over ``process_set`` (default: a sum over every rank)."""
    return raw_allreduce(tensor, name=name, op=op, prescale_factor=prescale_factor,
                         postscale_factor=postscale_factor,
                         ignore_name_scope=ignore_name_scope,
                         process_set_id=registered_set_id(process_set))


def _grouped_allreduce(tensors, name=None, op=Sum, prescale_factor=1.0,
                       postscale_factor=1.0, ignore_name_scope=False,
                       process_set=global_process_set):
    """One HorovodGroupedAllreduce op: ``tensors`` reduced together."""
    return raw_grouped_allreduce(tensors, name=name, op=op,
                                 prescale_factor=prescale_factor,
                                 postscale_factor=postscale_factor,
                                 ignore_name_scope=ignore_name_scope,
                                 process_set_id=registered_set_id(process_set))


def alltoall(tensor, splits=None, name=None, ignore_name_scope=False,
             process_set=global_process_set):
    """The raw HorovodAlltoall op: always ``(received tensor, received splits)``, with or
    without ``splits`` (``hvd.alltoall`` returns the splits only when given them)."""
    return raw_alltoall(tensor, splits=splits, name=name,
                        ignore_name_scope=ignore_name_scope,
                        process_set_id=registered_set_id(process_set))


def _reducescatter(tensor, name=None, op=Sum, ignore_name_scope=False,
                   process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """One HorovodReducescatter op: this rank's slice of the reduced tensor."""
    return raw_reducescatter(tensor, name=name, op=op, prescale_factor=prescale_factor,
                             postscale_factor=postscale_factor,
                             ignore_name_scope=ignore_name_scope,
                             process_set_id=registered_set_id(process_set))


def _grouped_reducescatter(tensors, name=None, op=Sum, ignore_name_scope=False,
                           process_set=global_process_set, prescale_factor=1.0,
                           postscale_factor=1.0):
    """A reducescatter of each tensor of a list (``<name>_<i>`` when named)."""
    return [_reducescatter(t, name=sub_name(name, i), op=op,
                           prescale_factor=prescale_factor,
                           postscale_factor=postscale_factor,
                           ignore_name_scope=ignore_name_scope, process_set=process_set)
            for i, t in enumerate(tensors)]

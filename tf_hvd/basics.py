"""Starting and stopping tf_hvd: ``hvd.init()`` and ``hvd.shutdown()``.

init joins the job through the core (tf_hvd._library), then sets up what lives
on the Python side: TensorFlow's thread pools (tf_hvd.tf_threads) and the
process-set objects (tf_hvd.process_sets). A process the elastic launcher
started to join a running job meets the others through tf_hvd.elastic.

This module also re-exports the basic API (size, rank, the reduce ops, ...)
that Horovod keeps in ``horovod.common.basics``::

    hvd.init()
    print(hvd.rank(), "of", hvd.size())
    hvd.shutdown()
"""

import atexit
import os

from tf_hvd import elastic, process_sets as _process_sets, scheduler, tf_threads
from tf_hvd._library import lib as _lib, op_lib as _op_lib  # noqa: F401 (re-exported)
from tf_hvd.reduce_ops import (  # noqa: F401 (re-exported)
    REDUCE_OP_NAMES as _REDUCE_OP_NAMES, Adasum, Average, Max, Min, Product, Sum)
from tf_hvd.topology import (  # noqa: F401 (re-exported)
    NOT_INITIALIZED_MESSAGE, check_initialized, check_topology, raise_not_running,
    ccl_built, cross_rank, cross_size, cuda_built, ddl_built, gloo_built, gloo_enabled,
    is_homogeneous, is_initialized, local_rank, local_size, mpi_built, mpi_enabled,
    mpi_threads_supported, nccl_built, rank, rocm_built, size, start_timeline,
    stop_timeline)


def init(comm=None, process_sets=None):
    """Initializes tf_hvd: joins the other processes of the job.

    The transport is chosen from the environment: MPI when the process was
    started by mpirun/mpiexec (or HOROVOD_CONTROLLER=mpi), Gloo when it was
    started by ``tfhvdrun`` (HOROVOD_RANK set), by Slurm's ``srun`` or with
    torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, ...: see
    ``tf_hvd.scheduler`` and docs/cluster.md), otherwise a job of size 1. A
    process that sees an engine's job of several ranks but cannot join it
    raises ``tf_hvd.scheduler.SchedulerEnvError`` instead of training alone.
    Calling init again while initialized does nothing.

    Args:
      comm: as in Horovod: None or [] (every process of the job); a list of
        MPI_COMM_WORLD ranks (under MPI only those processes call init and
        form the job, ranked in list order; on Gloo the list must name every
        rank); or an mpi4py communicator (MPI only), which becomes the job.
      process_sets: None, a list of ``hvd.ProcessSet`` (the same list on every
        process; they get ids 1, 2, ... and ``hvd.global_process_set`` is
        always there), or ``"dynamic"`` (sets HOROVOD_DYNAMIC_PROCESS_SETS=1
        so that ``hvd.add_process_set`` works later). A duplicate entry raises
        ValueError after init, as in Horovod.

    Unlike Horovod, when several ranks share this host and no TensorFlow op
    has run yet, init also splits the host's cores between them and turns
    off TensorFlow's thread spinning (see ``tf_hvd.tf_threads``;
    ``HOROVOD_TF_THREADS=0`` keeps TensorFlow's defaults).

    Example::

        ps = hvd.ProcessSet([0, 1])
        hvd.init(process_sets=[ps])
    """
    if not _lib.is_initialized():  # started by srun or torchrun-style: join that job
        scheduler.prepare(os.environ, lambda: _lib.knob_values()["HOROVOD_START_TIMEOUT"])
    comm_ranks, comm_handle, base = _process_sets.job_communicator(comm)
    sets, set_ranks = _process_sets.split_init_sets(process_sets, base, comm_ranks)
    # Parses every HOROVOD_* knob (HOROVOD_TF_THREADS included) before joining
    # the job: a malformed one raises RuntimeError naming it.
    if os.environ.get(elastic.JOIN_ENV) == "1" and not _lib.is_initialized():
        elastic.join_before_init()  # started to join a running elastic job
    else:
        _lib.init(set_ranks, comm_ranks, comm_handle)
    tf_threads.configure(_lib.local_size(), _lib.local_rank())
    if not _atexit_registered:
        _register_atexit()
    _process_sets.register_init_sets(sets)


_atexit_registered = False


def _register_atexit():
    # A process that ends without hvd.shutdown() still leaves the job cleanly.
    global _atexit_registered
    atexit.register(_shutdown_at_exit)
    _atexit_registered = True


def _shutdown_at_exit():
    try:
        if _lib.is_initialized():
            _lib.shutdown(exiting=True)
    except Exception:  # noqa: BLE001 - nothing useful to do at interpreter exit
        pass


def shutdown():
    """Shuts tf_hvd down. Pending collectives complete with an error."""
    _lib.shutdown()

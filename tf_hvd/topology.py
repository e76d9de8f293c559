"""Where the job stands: initialized or not, its shape, and what this build can do.

These read the core's state and never change it (``hvd.init()`` and
``hvd.shutdown()`` are in tf_hvd.basics)::

    hvd.init()
    hvd.size(), hvd.rank(), hvd.local_rank()   # e.g. (4, 2, 0) on rank 2 of 2 hosts x 2
    hvd.nccl_built()                            # what the library was built with
"""

import tensorflow as tf

from tf_hvd._library import lib as _lib

NOT_INITIALIZED_MESSAGE = "Horovod has not been initialized; use hvd.init()."


def raise_not_running():
    """Raises the error that says why collectives cannot run now (one message).

    * never initialized, or this process called hvd.shutdown(): ValueError, as in
      Horovod ("... not been initialized ..." / "... has been shut down ...");
    * the core stopped because of another rank (it shut down, exited, died, or the
      stall inspector ended the job): the TensorFlow error the pending collectives
      got, whose message names the rank and its host.
    """
    code, message = _lib.status() if hasattr(_lib, "status") else ("not_initialized", "")
    if code == "not_initialized":
        if message and "initialization failed" in message:
            raise ValueError(message + " (call hvd.init() again once the cause is fixed)")
        raise ValueError(message or NOT_INITIALIZED_MESSAGE)
    error_class = {
        "aborted": tf.errors.AbortedError,
        "unavailable": tf.errors.UnavailableError,
        "deadline_exceeded": tf.errors.DeadlineExceededError,
        "invalid_argument": tf.errors.InvalidArgumentError,
    }.get(code, tf.errors.UnknownError)
    raise error_class(None, None, message)


def check_topology():
    """Raises ValueError unless this process's hvd.init() succeeded and it has not
    called hvd.shutdown() (the topology outlives a core stopped by another rank's exit)."""
    if not _lib.topology_known():
        raise ValueError(NOT_INITIALIZED_MESSAGE)


def check_initialized():
    """Raises ValueError unless hvd.init() has been called (and no shutdown since)."""
    if not _lib.is_initialized():
        raise_not_running()


def is_initialized():
    """True between init() and shutdown()."""
    return bool(_lib.is_initialized())


def size():
    """Number of processes in the job."""
    check_topology()
    return int(_lib.size())


def rank():
    """This process's rank in the job, 0 <= rank < size."""
    check_topology()
    return int(_lib.rank())


def local_size():
    """Number of processes of the job on this host."""
    check_topology()
    return int(_lib.local_size())


def local_rank():
    """This process's rank among the processes on this host."""
    check_topology()
    return int(_lib.local_rank())


def cross_size():
    """Number of hosts (processes with the same local rank)."""
    check_topology()
    return int(_lib.cross_size())


def cross_rank():
    """This host's index among the hosts."""
    check_topology()
    return int(_lib.cross_rank())


def is_homogeneous():
    """True if every host runs the same number of processes."""
    check_topology()
    return bool(_lib.is_homogeneous())


def mpi_built():
    """True if an MPI library can be used: tf_hvd loads an MPICH-ABI ``libmpi.so.12`` at
    run time instead of linking one (Horovod: "built with MPI support"), so this is True
    where one is found (``HOROVOD_MPI_LIBRARY``, this environment's ``lib/`` where
    ``pip install mpich`` puts it, or the loader's path) and False on a machine without MPI,
    where Gloo still works.

        >>> hvd.mpi_built()   # doctest: +SKIP
        True
    """
    return bool(_lib.mpi_built())


def mpi_enabled():
    """True if this job runs over MPI (valid after init())."""
    return bool(_lib.mpi_enabled())


def mpi_threads_supported():
    """True if MPI was initialized with MPI_THREAD_MULTIPLE (valid after init())."""
    check_initialized()
    fn = getattr(_lib, "mpi_threads_supported", None)
    return bool(fn()) if fn is not None else False


def gloo_built():
    """True if the library was built with Gloo support."""
    return bool(_lib.gloo_built())


def gloo_enabled():
    """True if this job runs over Gloo (valid after init())."""
    return bool(_lib.gloo_enabled())


def nccl_built():
    """True if the library was built with NCCL (GPU collectives)."""
    return bool(_lib.nccl_built())


def cuda_built():
    """True if the library was built with CUDA."""
    return bool(_lib.cuda_built())


def rocm_built():
    """Always False: tf_hvd has no ROCm build."""
    return False


def ddl_built():
    """Always False: tf_hvd has no IBM DDL support."""
    return False


def ccl_built():
    """Always False: tf_hvd has no oneCCL support."""
    return False


def start_timeline(file_path, mark_cycles=False):
    """Starts writing a timeline to ``file_path`` (also: HOROVOD_TIMELINE)."""
    check_initialized()
    fn = getattr(_lib, "start_timeline", None)
    if fn is None:
        raise NotImplementedError(
            "start_timeline is not available in this build; set HOROVOD_TIMELINE "
            "before starting the job instead.")
    fn(file_path, mark_cycles)


def stop_timeline():
    """Stops writing the timeline started by start_timeline."""
    check_initialized()
    fn = getattr(_lib, "stop_timeline", None)
    if fn is None:
        raise NotImplementedError("stop_timeline is not available in this build.")
    fn()

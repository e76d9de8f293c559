"""Loading the native library and the basic process API (init, size, rank, ...).

``tf_hvd/_hvd.so`` is one shared library that is both a TensorFlow op library
(HorovodAllreduce, HorovodAllgather, ...) and the pybind11 module
``tf_hvd._hvd``. It is loaded once, the first time this module is imported:
``tf.load_op_library`` first (so TensorFlow registers the ops and kernels),
then the same file is imported as a Python extension module. Both views share
one global state in the process.
"""

import atexit
import glob
import importlib
import os

import tensorflow as tf

from tf_hvd import build_info, process_sets as _process_sets, tf_threads

# Reduce operations; the integers are the values the ops' ``reduce_op`` attr takes.
Average = 0
Sum = 1
Adasum = 2
Min = 3
Max = 4
Product = 5

_REDUCE_OP_NAMES = {
    Average: "Average",
    Sum: "Sum",
    Adasum: "Adasum",
    Min: "Min",
    Max: "Max",
    Product: "Product",
}

NOT_INITIALIZED_MESSAGE = "Horovod has not been initialized; use hvd.init()."

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _find_library():
    """Returns the path of the built _hvd shared library."""
    override = os.environ.get("TF_HVD_LIBRARY")
    if override:
        if not os.path.isfile(override):
            raise ImportError("TF_HVD_LIBRARY=%s does not name a file" % override)
        return override
    candidates = [os.path.join(_PACKAGE_DIR, "_hvd.so")]
    candidates += sorted(glob.glob(os.path.join(_PACKAGE_DIR, "_hvd.*.so")))
    for path in candidates:
        if os.path.isfile(path):
            return path
    raise ImportError(
        "tf_hvd's native library was not found in %s (expected _hvd.so). "
        "Build it first: `bash tools/setup.sh` in a source tree, or "
        "`pip install .`." % _PACKAGE_DIR)


def _load():
    path = _find_library()
    # A library built for another TensorFlow would fail inside the loader with an
    # undefined symbol; say which versions differ instead.
    build_info.check_library(path)
    op_lib = tf.load_op_library(path)
    if os.path.dirname(os.path.abspath(path)) == _PACKAGE_DIR:
        module = importlib.import_module("tf_hvd._hvd")
    else:
        # A library outside the package (TF_HVD_LIBRARY): import that file.
        from importlib import machinery, util
        loader = machinery.ExtensionFileLoader("tf_hvd._hvd", path)
        spec = util.spec_from_file_location("tf_hvd._hvd", path, loader=loader)
        module = util.module_from_spec(spec)
        loader.exec_module(module)
    return op_lib, module


# _op_lib: the generated TF op wrappers (horovod_allreduce, ...);
# _lib: the pybind11 module (init, size, ...).
_op_lib, _lib = _load()

# The collective ops are stateful, so that TensorFlow never constant-folds
# them (their result depends on the other ranks). Inside tf.function,
# TensorFlow would then chain every stateful op in program order, which
# serialises the allreduces of a backward pass and defeats tensor fusion;
# the core orders collectives itself (by name, across ranks), so they are
# registered as "must run, order insensitive", as TensorFlow does for its own
# infeed ops.
_COLLECTIVE_OP_TYPES = frozenset((
    "HorovodAllreduce", "HorovodGroupedAllreduce", "HorovodAllgather", "HorovodBroadcast",
    "HorovodAlltoall", "HorovodReducescatter"))


def _register_order_insensitive_ops():
    from tensorflow.python.framework import auto_control_deps as acd
    name = "MUST_RUN_ORDER_INSENSITIVE_STATEFUL_OPS"
    current = getattr(acd, name, None)
    if current is not None and not _COLLECTIVE_OP_TYPES <= current:
        setattr(acd, name, frozenset(current) | _COLLECTIVE_OP_TYPES)


_register_order_insensitive_ops()
_process_sets._setup(_lib)


def _raise_not_running():
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


def _check_topology():
    """Raises ValueError unless this process's hvd.init() succeeded and it has not
    called hvd.shutdown() (the topology outlives a core stopped by another rank's exit)."""
    if not _lib.topology_known():
        raise ValueError(NOT_INITIALIZED_MESSAGE)


def _check_initialized():
    """Raises ValueError unless hvd.init() has been called (and no shutdown since)."""
    if not _lib.is_initialized():
        _raise_not_running()


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
        from tf_hvd import scheduler
        scheduler.prepare(os.environ, lambda: _lib.knob_values()["HOROVOD_START_TIMEOUT"])
    comm_ranks, comm_handle, base = _process_sets._job_communicator(comm)
    sets, set_ranks = _process_sets._split_init_sets(process_sets, base, comm_ranks)
    # Parses every HOROVOD_* knob (HOROVOD_TF_THREADS included) before joining
    # the job: a malformed one raises RuntimeError naming it.
    if os.environ.get("TF_HVD_ELASTIC_JOIN") == "1" and not _lib.is_initialized():
        from tf_hvd import elastic  # started to join a running elastic job
        elastic.join_before_init()
    else:
        _lib.init(set_ranks, comm_ranks, comm_handle)
    tf_threads.configure(_lib.local_size())
    if not _atexit_registered:
        _register_atexit()
    _process_sets._init_process_sets(sets)


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


def is_initialized():
    """True between init() and shutdown()."""
    return bool(_lib.is_initialized())


def size():
    """Number of processes in the job."""
    _check_topology()
    return int(_lib.size())


def rank():
    """This process's rank in the job, 0 <= rank < size."""
    _check_topology()
    return int(_lib.rank())


def local_size():
    """Number of processes of the job on this host."""
    _check_topology()
    return int(_lib.local_size())


def local_rank():
    """This process's rank among the processes on this host."""
    _check_topology()
    return int(_lib.local_rank())


def cross_size():
    """Number of hosts (processes with the same local rank)."""
    _check_topology()
    return int(_lib.cross_size())


def cross_rank():
    """This host's index among the hosts."""
    _check_topology()
    return int(_lib.cross_rank())


def is_homogeneous():
    """True if every host runs the same number of processes."""
    _check_topology()
    return bool(_lib.is_homogeneous())


def mpi_built():
    """True if the library was built with MPI support."""
    return bool(_lib.mpi_built())


def mpi_enabled():
    """True if this job runs over MPI (valid after init())."""
    return bool(_lib.mpi_enabled())


def mpi_threads_supported():
    """True if MPI was initialized with MPI_THREAD_MULTIPLE (valid after init())."""
    _check_initialized()
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
    _check_initialized()
    fn = getattr(_lib, "start_timeline", None)
    if fn is None:
        raise NotImplementedError(
            "start_timeline is not available in this build; set HOROVOD_TIMELINE "
            "before starting the job instead.")
    fn(file_path, mark_cycles)


def stop_timeline():
    """Stops writing the timeline started by start_timeline."""
    _check_initialized()
    fn = getattr(_lib, "stop_timeline", None)
    if fn is None:
        raise NotImplementedError("stop_timeline is not available in this build.")
    fn()

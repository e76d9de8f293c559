"""TensorFlow's thread pools and CPU allocator, set up at ``hvd.init()``.

TensorFlow sizes its thread pools for a process that owns the whole machine,
and its pool workers spin for a while before they sleep. With N ranks on one
host that is N times as many threads as cores, and the spinning workers of one
rank take the cores that its background thread (and the other ranks) need to
finish a collective: measured on a 2-core host at np=2, a chain of 4 KiB
allreduces in a tf.function took ~130 us per op with spinning and ~42 us
without (MPI), and Keras fit ran faster with the cores split between ranks.

So, at ``hvd.init()``, when more than one rank runs on this host and
TensorFlow's runtime has not started yet (no op has run), tf_hvd
* turns off thread spinning (ConfigProto.experimental.disable_thread_spinning);
* splits the cores: intra-op threads = cores // local_size (at least 1),
  inter-op threads = max(2, that), unless the script already chose them with
  ``tf.config.threading``.
* binds each local rank (every thread it has, so every thread it starts) to
  its own slice of the CPUs it may use: local rank r of n gets the r-th of n
  equal, contiguous slices (``mpirun`` binds ranks to cores the same way).
  Unbound, the scheduler moves a rank's compute onto the core where a peer is
  finishing its part of the step, and every synchronous step waits for the
  slower rank: measured on a 2-core host at np=2, an MLP's tape step went from
  3.04 to 2.71 ms (a step with one scalar allreduce: 2.53 to 2.31 ms). Not
  done with ``HOROVOD_CPU_BIND=0``, when ``HOROVOD_THREAD_AFFINITY`` pins the
  background thread, or with fewer CPUs than local ranks. While other
  processes take a quarter or more of a rank's CPUs (two seconds in a row),
  the rank may run on all the CPUs it had, and binds again after
  ``HOROVOD_CPU_BIND_RETRY_SECONDS`` (30; doubled while the contention
  lasts; 0 keeps the binding): a bound rank cannot leave a core that a busy
  process shares with it, and every step would wait for it
  (cc/common/cpu_binding.h).
``HOROVOD_TF_THREADS=0`` leaves TensorFlow's defaults alone (and binds
nothing); what was applied is returned by :func:`tf_thread_settings` (and
logged at debug level). Torchrun does the same for OpenMP (OMP_NUM_THREADS=1
per rank).

Whatever the number of local ranks, init also selects TensorFlow's caching
(BFC) CPU allocator (TensorFlow's own TF_CPU_ALLOCATOR_USE_BFC, unless the
environment already sets it): the default allocator maps every large tensor
afresh and unmaps it when freed, so each step's 256 MiB allreduce output cost
65536 page faults (about 40% of the allreduce); the caching allocator reuses
the memory from the second step on.
"""

import logging
import os

import tensorflow as tf
from tensorflow.python.eager import context

from tf_hvd._library import lib as _lib

_log = logging.getLogger("tf_hvd")

# What configure() did, for tf_thread_settings().
_applied = {"configured": False, "reason": "hvd.init() has not run"}
# The CPUs the process could use before bind_cores() first bound it: an elastic
# re-init (new local ranks) binds again from these.
_cpus_before_binding = None


def _host_cores():
    if _cpus_before_binding:  # bound by an earlier init: the CPUs it had before
        return len(_cpus_before_binding)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _runtime_started(ctx):
    # The eager context creates TensorFlow's device thread pools on first use;
    # after that the settings below no longer take effect.
    return getattr(ctx, "_context_handle", None) is not None


def knob(name="HOROVOD_TF_THREADS"):
    """HOROVOD_TF_THREADS (or HOROVOD_CPU_BIND) as a bool (default True), parsed by the
    library's one knob parser (cc/common/knobs.cc); a malformed value raises RuntimeError
    naming it."""
    return _lib.knob_values()[name]


def bind_cores(local_rank, local_size):
    """Binds every thread of this process to local rank local_rank's slice of the CPUs
    it may use (see the module docstring); returns the CPUs, or why nothing was bound.

        >>> bind_cores(1, 2)   # on 4 CPUs  # doctest: +SKIP
        [2, 3]
    """
    if not knob("HOROVOD_CPU_BIND"):
        return "HOROVOD_CPU_BIND=0"
    if _lib.knob_values()["HOROVOD_THREAD_AFFINITY"]:
        return "HOROVOD_THREAD_AFFINITY pins the background thread"
    global _cpus_before_binding
    if _cpus_before_binding is None:
        _cpus_before_binding = sorted(os.sched_getaffinity(0))
    cpus = _cpus_before_binding
    per_rank = len(cpus) // local_size
    if per_rank < 1:
        return "%d CPU(s) for %d local ranks" % (len(cpus), local_size)
    mine = cpus[local_rank * per_rank:(local_rank + 1) * per_rank]
    # Every thread the process has (the background thread among them); threads
    # started later inherit the mask. The background thread gives the binding
    # up while other processes use these CPUs (HOROVOD_CPU_BIND_RETRY_SECONDS).
    _lib.bind_cpus(mine, cpus, _lib.knob_values()["HOROVOD_CPU_BIND_RETRY_SECONDS"])
    return mine


def _use_caching_allocator(ctx):
    """Selects the BFC CPU allocator if the runtime has not started; returns whether it is."""
    if "TF_CPU_ALLOCATOR_USE_BFC" not in os.environ and not _runtime_started(ctx):
        os.environ["TF_CPU_ALLOCATOR_USE_BFC"] = "true"
    return os.environ.get("TF_CPU_ALLOCATOR_USE_BFC", "").lower() in ("1", "true")


def configure(local_size, local_rank=0):
    """Applies the settings described above; returns what was done (a dict)."""
    global _applied
    caching = _use_caching_allocator(context.context())
    _applied = _configure_threads(local_size)
    if _applied["configured"] or _cpus_before_binding is not None:
        bound = bind_cores(local_rank, local_size)
        _applied["cpus" if isinstance(bound, list) else "not_bound"] = bound
    _applied["caching_allocator"] = caching
    return dict(_applied)


def _configure_threads(local_size):
    if not knob():
        return {"configured": False, "reason": "HOROVOD_TF_THREADS=0"}
    if local_size <= 1:
        return {"configured": False, "reason": "one rank on this host"}
    ctx = context.context()
    if _runtime_started(ctx):
        reason = "TensorFlow's runtime had already started before hvd.init()"
        _log.debug("tf_hvd: thread pools not configured: %s", reason)
        return {"configured": False, "reason": reason}
    cores = _host_cores()
    per_rank = max(1, cores // local_size)
    intra = tf.config.threading.get_intra_op_parallelism_threads() or per_rank
    inter = tf.config.threading.get_inter_op_parallelism_threads() or max(2, per_rank)
    tf.config.threading.set_intra_op_parallelism_threads(intra)
    tf.config.threading.set_inter_op_parallelism_threads(inter)
    # The eager context copies this ConfigProto when it starts; the thread
    # counts above are applied on top of it.
    config = ctx._config if ctx._config is not None else tf.compat.v1.ConfigProto()
    config.experimental.disable_thread_spinning = True
    ctx._config = config
    applied = {"configured": True, "cores": cores, "local_size": local_size,
               "intra_op_threads": intra, "inter_op_threads": inter, "spinning": False}
    _log.debug("tf_hvd: thread pools configured: %s", applied)
    return applied


def tf_thread_settings():
    """What hvd.init() did to TensorFlow's thread pools (see this module); with a binding,
    "binding" says whether the rank is on its own CPUs now and how often it gave them up.

        >>> tf_thread_settings()["binding"]  # doctest: +SKIP
        {'active': True, 'bound': True, 'releases': 0, 'cpus': [1]}
    """
    settings = dict(_applied)
    if "cpus" in settings:
        settings["binding"] = _lib.cpu_binding_state()
    return settings

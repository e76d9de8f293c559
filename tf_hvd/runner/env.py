"""The environment variables each rank is started with.

``knob_env(args)`` turns tuning flags into Horovod's environment knobs (same names as
Horovod, so a setting means the same thing to a Horovod user); ``gloo_rank_env`` adds
the per-rank topology and the rendezvous address the Gloo transport needs.
"""

from .auth import SECRET_ENV

# Variables copied from the launcher's environment to ranks started over ssh (local
# ranks inherit the whole environment).
_FORWARDED_NAMES = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "PYTHONUNBUFFERED")
_FORWARDED_PREFIXES = ("HOROVOD_", "TF_", "NCCL_", "OMP_", "KMP_", "CUDA_", "TF_HVD_")
# Secrets never travel on a command line (an outer job's secret would be stale anyway).
_NEVER_FORWARDED = frozenset([SECRET_ENV])


def _number(value):
    """Format a float without a spurious '.0' (5.0 -> '5', 0.5 -> '0.5')."""
    return format(float(value), "g") if float(value) != int(value) else str(int(value))


def knob_env(args):
    """Map the parsed tuning flags to HOROVOD_* variables (only flags that were given)."""
    env = {}
    if args.fusion_threshold_mb is not None:
        env["HOROVOD_FUSION_THRESHOLD"] = str(int(round(args.fusion_threshold_mb * 1024 * 1024)))
    if args.cycle_time_ms is not None:
        env["HOROVOD_CYCLE_TIME"] = _number(args.cycle_time_ms)
    if args.cache_capacity is not None:
        env["HOROVOD_CACHE_CAPACITY"] = str(args.cache_capacity)
    if args.timeline_filename is not None:
        env["HOROVOD_TIMELINE"] = args.timeline_filename
    if args.timeline_mark_cycles is not None:
        env["HOROVOD_TIMELINE_MARK_CYCLES"] = "1" if args.timeline_mark_cycles else "0"
    if args.log_level is not None:
        env["HOROVOD_LOG_LEVEL"] = args.log_level
    # On/off pairs (None: not given): "0" also keeps autotune from changing the knob.
    for dest, name in (("hierarchical_allreduce", "HOROVOD_HIERARCHICAL_ALLREDUCE"),
                       ("hierarchical_allgather", "HOROVOD_HIERARCHICAL_ALLGATHER"),
                       ("torus_allreduce", "HOROVOD_TORUS_ALLREDUCE"),
                       ("no_stall_check", "HOROVOD_STALL_CHECK_DISABLE")):
        if getattr(args, dest, None) is not None:
            env[name] = "1" if getattr(args, dest) else "0"
    if args.autotune:
        env["HOROVOD_AUTOTUNE"] = "1"
    if args.autotune_log_file is not None:
        env["HOROVOD_AUTOTUNE_LOG"] = args.autotune_log_file
    for dest, name in (("autotune_warmup_samples", "HOROVOD_AUTOTUNE_WARMUP_SAMPLES"),
                       ("autotune_steps_per_sample", "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE"),
                       ("autotune_bayes_opt_max_samples",
                        "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES")):
        if getattr(args, dest) is not None:
            env[name] = str(getattr(args, dest))
    if args.autotune_gaussian_process_noise is not None:
        env["HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE"] = _number(
            args.autotune_gaussian_process_noise)
    if args.stall_check_warning_time_seconds is not None:
        env["HOROVOD_STALL_CHECK_TIME_SECONDS"] = _number(args.stall_check_warning_time_seconds)
    if args.stall_check_shutdown_time_seconds is not None:
        env["HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"] = _number(
            args.stall_check_shutdown_time_seconds)
    if args.start_timeout is not None:
        env["HOROVOD_START_TIMEOUT"] = _number(args.start_timeout)
    if args.network_interface:
        env["HOROVOD_GLOO_IFACE"] = args.network_interface
    env.update(_library_env(args))
    return env


def _library_env(args):
    """horovodrun's library and logging flags as the ranks' variables."""
    env = {}
    if args.nics:
        env["NCCL_SOCKET_IFNAME"] = ",".join(args.nics)
    if args.tcp_flag:
        env["NCCL_IB_DISABLE"] = "1"
    if getattr(args, "num_nccl_streams", None) is not None:
        env["HOROVOD_NUM_NCCL_STREAMS"] = str(args.num_nccl_streams)
    if args.gloo_timeout_seconds is not None:
        env["HOROVOD_GLOO_TIMEOUT_SECONDS"] = _number(args.gloo_timeout_seconds)
    if args.thread_affinity is not None:
        env["HOROVOD_THREAD_AFFINITY"] = str(args.thread_affinity)
    if args.mpi_threads_disable is not None:
        env["HOROVOD_MPI_THREADS_DISABLE"] = "1" if args.mpi_threads_disable else "0"
    if args.log_with_timestamp is not None:
        env["HOROVOD_LOG_HIDE_TIME"] = "0" if args.log_with_timestamp else "1"
    return env


# TensorFlow's start-up lines on every rank (cpu_feature_guard, oneDNN, cuInit...) are
# hidden unless the user asked for them (--verbose, or TensorFlow's own variable).
QUIET_ENV = "TF_HVD_QUIET_TF_STARTUP"  # ranks' wrappers drop those lines too (output.py)


def quiet_env(args, environ):
    """{TF_CPP_MIN_LOG_LEVEL: 1 (no INFO lines), QUIET_ENV: 1} for the ranks, or {} with
    --verbose or when the user set TF_CPP_MIN_LOG_LEVEL (then everything is shown)."""
    if getattr(args, "verbose", False) or "TF_CPP_MIN_LOG_LEVEL" in environ:
        return {}
    return {"TF_CPP_MIN_LOG_LEVEL": "1", QUIET_ENV: "1"}


def gloo_rank_env(slot, hostname, rendezvous_addr, rendezvous_port, knobs):
    """Variables for one rank in Gloo mode.

    ``slot`` is a placement.RankSlot; ``hostname`` the address this rank binds and
    publishes for Gloo's TCP pairs (127.0.0.1 when everything runs locally).
    """
    env = dict(knobs)
    env.update({
        "HOROVOD_RANK": str(slot.rank),
        "HOROVOD_SIZE": str(slot.size),
        "HOROVOD_LOCAL_RANK": str(slot.local_rank),
        "HOROVOD_LOCAL_SIZE": str(slot.local_size),
        "HOROVOD_CROSS_RANK": str(slot.cross_rank),
        "HOROVOD_CROSS_SIZE": str(slot.cross_size),
        "HOROVOD_HOSTNAME": hostname,
        "HOROVOD_SLOT_HOSTNAME": slot.hostname.split("@", 1)[-1],
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": rendezvous_addr,
        "HOROVOD_GLOO_RENDEZVOUS_PORT": str(rendezvous_port),
        "HOROVOD_CONTROLLER": "gloo",
    })
    return env


def process_env(base, extra):
    """Full environment for a local child: ``base`` (usually os.environ) + ``extra``.

    Python children are made unbuffered unless the user chose otherwise, so their
    lines reach the launcher (and the prefixing) as soon as they are printed. A
    rendezvous secret in ``base`` (an enclosing job's) is dropped; the job's own comes
    in ``extra``.
    """
    env = {k: v for k, v in base.items() if k not in _NEVER_FORWARDED}
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(extra)
    return env


def forwarded_env(base, extra):
    """Environment to pass explicitly to a remote rank: a few of ours plus ``extra``."""
    env = {}
    for name, value in base.items():
        if name in _NEVER_FORWARDED:
            continue
        if name in _FORWARDED_NAMES or name.startswith(_FORWARDED_PREFIXES):
            env[name] = value
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(extra)
    return env

"""The command line's tuning flags as the ranks' environment knobs.

Same names as Horovod's, so a setting means the same thing to a Horovod user; only
the flags that were given are written (the core's defaults stand for the rest).

    >>> from tf_hvd.runner.command_line import parser as cli
    >>> knob_env(cli.parse(["-np", "2", "--cycle-time-ms", "2.5", "python", "t.py"]))
    {'HOROVOD_CYCLE_TIME': '2.5'}
"""

from ...job.rank_env import number_text as _number


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
        if getattr(args, dest) is not None:
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
    if args.num_nccl_streams is not None:
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

"""Command-line interface of tfhvdrun: flags (named as in horovodrun) and their checks.

Every usage problem is reported as exactly one line ``tfhvdrun: error: <what>`` on
stderr with exit status 2 (:class:`UsageError` carries the message; ``parse`` raises
it, ``launch.main`` prints it).
"""

import argparse
import os
import re
import shlex
import sys

from ... import __version__
from ...job import knob_rules
from . import config_file
from ...job import lsf_hosts
from . import parity
from .usage import PROG, UsageError

LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "FATAL")


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(" ".join(message.split()))


def _integer(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected an integer, got %r" % text)
    return value


def _number(text):
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a number, got %r" % text)


class _NicsAction(argparse.Action):
    """--network-interfaces eth0,eth1 (or repeated): an ordered list without repeats."""

    def __call__(self, parser, namespace, values, option_string=None):
        nics = list(getattr(namespace, self.dest, None) or [])
        for name in values.split(","):
            name = name.strip()
            if not name:
                raise argparse.ArgumentError(self, "empty interface name in %r" % values)
            if name not in nics:
                nics.append(name)
        setattr(namespace, self.dest, nics)


def _add_autotune_flags(p):
    """horovodrun's autotune flags (HOROVOD_AUTOTUNE*; docs/autotune.md)."""
    tune = p.add_argument_group("autotune")
    parity.add_on_off(tune, "--autotune", "--no-autotune", "autotune",
                      "tune the fusion threshold, cycle time, response cache and "
                      "hierarchical allreduce online (HOROVOD_AUTOTUNE=1)")
    tune.add_argument("--autotune-log-file", dest="autotune_log_file", metavar="FILE",
                      help="rank 0 writes one CSV row per autotune sample (HOROVOD_AUTOTUNE_LOG)")
    tune.add_argument("--autotune-warmup-samples", dest="autotune_warmup_samples",
                      type=_integer, metavar="N",
                      help="samples discarded at the start (HOROVOD_AUTOTUNE_WARMUP_SAMPLES, "
                           "default 3)")
    tune.add_argument("--autotune-steps-per-sample", dest="autotune_steps_per_sample",
                      type=_integer, metavar="N",
                      help="reducing cycles per sample (HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE, "
                           "default 10)")
    tune.add_argument("--autotune-bayes-opt-max-samples", dest="autotune_bayes_opt_max_samples",
                      type=_integer, metavar="N",
                      help="scored samples before the best values are kept "
                           "(HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES, default 20)")
    tune.add_argument("--autotune-gaussian-process-noise",
                      dest="autotune_gaussian_process_noise", type=_number, metavar="X",
                      help="noise of the Gaussian process "
                           "(HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE, default 0.8)")


def _add_horovodrun_flags(p):
    """horovodrun's build, config, library and logging flags (same names and meanings)."""
    p.add_argument("-cb", "--check-build", dest="check_build", action="store_true",
                   help="show which frameworks, controllers and tensor operations this "
                        "tf_hvd was built with, and exit")
    p.add_argument("--disable-cache", dest="disable_cache", action="store_true",
                   help="run the launcher's start-up checks every time instead of reusing "
                        "results less than 60 minutes old (~/.tf_hvd/launcher_cache)")
    p.add_argument("--config-file", dest="config_file", metavar="FILE",
                   help="YAML file of horovodrun's parameter schema (params, timeline, "
                        "stall_check, library_options, logging, autotune, controller); "
                        "flags given on the command line win")
    lib = p.add_argument_group("library arguments")
    lib.add_argument("--mpi-args", dest="mpi_args", metavar="ARGS",
                     help="extra arguments for mpiexec (with --mpi), e.g. "
                          "--mpi-args=\"-genv FOO 1\"")
    lib.add_argument("--binding-args", dest="binding_args", metavar="ARGS",
                     help="process binding arguments for mpiexec, replacing the default "
                          "(Open MPI: -bind-to none -map-by slot; MPICH: none)")
    lib.add_argument("--tcp", dest="tcp_flag", action="store_true",
                     help="use TCP only (ranks get NCCL_IB_DISABLE=1; Gloo is TCP anyway)")
    lib.add_argument("--gloo-timeout-seconds", dest="gloo_timeout_seconds", type=_number,
                     metavar="S", help="timeout of Gloo operations "
                                       "(HOROVOD_GLOO_TIMEOUT_SECONDS)")
    lib.add_argument("--num-nccl-streams", dest="num_nccl_streams", type=_integer,
                     metavar="N", help="accepted for horovodrun parity; no effect in "
                                       "tf_hvd (HOROVOD_NUM_NCCL_STREAMS)")
    lib.add_argument("--thread-affinity", dest="thread_affinity", type=_integer,
                     metavar="CPU", help="pin the background thread of local rank r to CPU "
                                         "CPU + r (HOROVOD_THREAD_AFFINITY)")
    threads = lib.add_mutually_exclusive_group()
    threads.add_argument("--mpi-threads-disable", dest="mpi_threads_disable",
                         action="store_const", const=True,
                         help="initialize MPI without thread support "
                              "(HOROVOD_MPI_THREADS_DISABLE=1)")
    threads.add_argument("--no-mpi-threads-disable", dest="mpi_threads_disable",
                         action="store_const", const=False, help=argparse.SUPPRESS)
    logs = p.add_argument_group("logging arguments")
    stamp = logs.add_mutually_exclusive_group()
    stamp.add_argument("--log-with-timestamp", dest="log_with_timestamp",
                       action="store_const", const=True,
                       help="timestamps in the core's log lines (HOROVOD_LOG_HIDE_TIME=0)")
    stamp.add_argument("--log-without-timestamp", dest="log_with_timestamp",
                       action="store_const", const=False,
                       help="no timestamps in the core's log lines (HOROVOD_LOG_HIDE_TIME=1)")
    stamp.add_argument("--log-hide-timestamp", dest="log_with_timestamp", const=False,
                       action=parity.DeprecatedSpelling, replacement="--log-without-timestamp")
    stamp.add_argument("--no-log-hide-timestamp", dest="log_with_timestamp", const=True,
                       action=parity.DeprecatedSpelling, replacement="--log-with-timestamp")
    logs.add_argument("-prefix-timestamp", "--prefix-output-with-timestamp",
                      dest="prefix_output_with_timestamp", action="store_true",
                      help="start every output line of the ranks with the time")


def build_parser():
    p = _Parser(
        prog=PROG,
        usage="%(prog)s -np N [-H host1:2,host2:2 | --hostfile FILE] [--gloo | --mpi] "
              "[options] command [args ...]",
        description="Run a tf_hvd (Horovod-style) training program on N processes. "
                    "Flags follow horovodrun.")
    p.add_argument("-v", "--version", action="version", version=__version__,
                   help="show tf_hvd's version and exit")
    p.add_argument("-np", "--num-proc", dest="num_proc", type=_integer,
                   metavar="N", help="number of processes (ranks) to start (required, "
                                     "except with -cb)")
    hosts = p.add_mutually_exclusive_group()
    hosts.add_argument("-H", "--hosts", dest="hosts", metavar="HOSTS",
                       help="comma-separated host:slots list (default localhost:N)")
    hosts.add_argument("-hostfile", "--hostfile", dest="hostfile", metavar="FILE",
                       help="file with one 'host slots=N' per line")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--gloo", dest="mode", action="store_const", const="gloo",
                      help="use the Gloo transport, started by this launcher (default)")
    mode.add_argument("--mpi", dest="mode", action="store_const", const="mpi",
                      help="start the ranks with mpiexec and use the MPI transport")
    mode.add_argument("--jsrun", dest="mode", action="store_const", const="jsrun",
                      help="in an LSF job: start the ranks with jsrun and use the MPI "
                           "transport (docs/launcher.md)")
    p.add_argument("-p", "--ssh-port", dest="ssh_port", type=_integer, metavar="PORT",
                   help="ssh port on the remote hosts")
    p.add_argument("-i", "--ssh-identity-file", dest="ssh_identity_file", metavar="FILE",
                   help="ssh identity (private key) file")
    p.add_argument("--start-timeout", dest="start_timeout", type=_number, metavar="SECONDS",
                   help="the launcher's start-up timeout: its checks and starting the "
                        "ranks, and the ranks meeting at hvd.init(), must finish within "
                        "it (default $HOROVOD_START_TIMEOUT; ranks get HOROVOD_START_TIMEOUT)")
    p.add_argument("--network-interfaces", "--network-interface", dest="nics",
                   action=_NicsAction, metavar="IFACES",
                   help="comma-separated network interfaces for communication (may be "
                        "repeated); the first is the rendezvous address and Gloo's "
                        "(HOROVOD_GLOO_IFACE)")
    p.add_argument("--rendezvous-port", dest="rendezvous_port", type=_integer, default=0,
                   metavar="PORT",
                   help="TCP port of the launcher's rendezvous server in Gloo mode "
                        "(default 0: any free port)")
    p.add_argument("--output-filename", dest="output_filename", metavar="DIR",
                   help="also write each rank's output to DIR/rank.<r>/stdout and stderr "
                        "(<r> zero-padded to the width of the largest rank, as horovodrun)")
    p.add_argument("--verbose", dest="verbose", action="store_true",
                   help="print what the launcher does")
    knobs = p.add_argument_group("tuning (Horovod environment knobs)")
    knobs.add_argument("--fusion-threshold-mb", dest="fusion_threshold_mb", type=_number,
                       metavar="MB", help="tensor fusion buffer size (HOROVOD_FUSION_THRESHOLD)")
    knobs.add_argument("--cycle-time-ms", dest="cycle_time_ms", type=_number, metavar="MS",
                       help="background loop cycle time (HOROVOD_CYCLE_TIME)")
    knobs.add_argument("--cache-capacity", dest="cache_capacity", type=_integer,
                       metavar="N", help="response cache entries (HOROVOD_CACHE_CAPACITY)")
    knobs.add_argument("--timeline-filename", dest="timeline_filename", metavar="FILE",
                       help="write a Chrome-trace timeline (HOROVOD_TIMELINE)")
    cycles = knobs.add_mutually_exclusive_group()
    cycles.add_argument("--timeline-mark-cycles", dest="timeline_mark_cycles",
                        action="store_const", const=True,
                        help="mark cycles in the timeline (HOROVOD_TIMELINE_MARK_CYCLES)")
    cycles.add_argument("--no-timeline-mark-cycles", dest="timeline_mark_cycles",
                        action="store_const", const=False,
                        help="do not mark cycles (HOROVOD_TIMELINE_MARK_CYCLES=0)")
    knobs.add_argument("--log-level", dest="log_level", type=str.upper, choices=LOG_LEVELS,
                       metavar="LEVEL", help="core log level: " + ", ".join(LOG_LEVELS))
    parity.add_on_off(knobs, "--no-stall-check", "--stall-check", "no_stall_check",
                      "disable the stall inspector (HOROVOD_STALL_CHECK_DISABLE=1)")
    knobs.add_argument("--stall-check-warning-time-seconds",
                       dest="stall_check_warning_time_seconds", type=_number,
                       metavar="S", help="HOROVOD_STALL_CHECK_TIME_SECONDS")
    knobs.add_argument("--stall-check-shutdown-time-seconds",
                       dest="stall_check_shutdown_time_seconds", type=_number,
                       metavar="S", help="HOROVOD_STALL_SHUTDOWN_TIME_SECONDS")
    _add_autotune_flags(p)
    _add_horovodrun_flags(p)
    _add_fault_tolerance_flags(p)
    _add_algorithm_flags(knobs)
    p.add_argument("command", nargs=argparse.REMAINDER,
                   help="the program to run on every rank, e.g. python train.py")
    return p


def _add_algorithm_flags(knobs):
    """On/off pairs; "off" also keeps autotune from changing it (Horovod's meaning)."""
    parity.add_on_off(knobs, "--hierarchical-allreduce", "--no-hierarchical-allreduce",
                      "hierarchical_allreduce", "allreduce within each host, then across "
                      "hosts (HOROVOD_HIERARCHICAL_ALLREDUCE=1)",
                      "never hierarchical allreduce, not even by autotune (=0)")
    parity.add_on_off(knobs, "--hierarchical-allgather", "--no-hierarchical-allgather",
                      "hierarchical_allgather", "allgather across hosts, then within each "
                      "host (HOROVOD_HIERARCHICAL_ALLGATHER=1)",
                      "never hierarchical allgather (HOROVOD_HIERARCHICAL_ALLGATHER=0)")
    parity.add_on_off(knobs, "--torus-allreduce", "--no-torus-allreduce", "torus_allreduce",
                      "accepted for horovodrun parity; no effect in tf_hvd "
                      "(HOROVOD_TORUS_ALLREDUCE)")


# -- fault tolerance: restarts (and elastic runs) -------------------------------------------

def _add_fault_tolerance_flags(p):
    ft = p.add_argument_group("fault tolerance")
    ft.add_argument("--max-restarts", dest="max_restarts", type=_integer, default=0,
                    metavar="N",
                    help="when a rank fails, stop every rank and start the whole job again "
                         "(fresh rendezvous), up to N times; scripts resume from their own "
                         "checkpoints (Gloo mode; default 0)")
    # horovodrun's elastic spellings: --min-num-proc/--max-num-proc are the same flags.
    ft.add_argument("--min-np", "--min-num-proc", dest="min_np", type=_integer, metavar="N",
                    help="elastic run (tf_hvd.elastic): a failed rank does not end the job "
                         "while at least N ranks are left (default -np with "
                         "--host-discovery-script)")
    ft.add_argument("--max-np", "--max-num-proc", dest="max_np", type=_integer, metavar="N",
                    help="elastic run: at most N ranks (default: -np, or no limit with "
                         "--host-discovery-script)")
    ft.add_argument("--elastic-timeout", dest="elastic_timeout", type=_number, default=None,
                    metavar="SECONDS",
                    help="elastic run: how long to wait for --min-np slots (at the start) or "
                         "ranks (after a failure), and how long survivors may take to "
                         "re-form the job (default $HOROVOD_ELASTIC_TIMEOUT, else 600)")
    ft.add_argument("--reset-limit", dest="reset_limit", type=_integer, metavar="N",
                    help="elastic run: end the job after N resets (lost ranks)")
    ft.add_argument("--host-discovery-script", dest="host_discovery_script", metavar="FILE",
                    help="elastic run: executable printing the available hosts, one "
                         "host[:slots] per line; the job starts on them (no -H needed) once "
                         "-np slots are listed, ranks are added (up to --max-np) as slots "
                         "appear and join at the next commit; ranks on hosts it no longer "
                         "lists are stopped")
    ft.add_argument("--slots-per-host", dest="slots_per_host", type=_integer, default=1,
                    metavar="N", help="elastic run: slots of a discovered host printed "
                                      "without :slots (default 1)")
    ft.add_argument("--blacklist-cooldown-range", dest="blacklist_cooldown_range",
                    type=_integer, nargs=2, metavar=("MIN", "MAX"),
                    help="elastic run with --host-discovery-script: a host where a rank "
                         "failed gets no new rank for a random MIN..MAX seconds, growing "
                         "with each failure (default: for the rest of the job)")


ELASTIC_TIMEOUT_ENV, ELASTIC_TIMEOUT_DEFAULT = "HOROVOD_ELASTIC_TIMEOUT", 600.0


def _knob_seconds(environ, name, default):
    """A timeout knob by the knob table's rules (job/knob_rules.py); UsageError with the
    table's message when it is malformed."""
    try:
        return knob_rules.seconds_knob(environ, name, default)
    except ValueError as e:
        raise UsageError(str(e))


def _elastic_defaults(args):
    """horovodrun's rules: --host-discovery-script alone makes an elastic job (min-np =
    -np); --elastic-timeout defaults to $HOROVOD_ELASTIC_TIMEOUT, else 600 s."""
    if args.host_discovery_script is not None and args.min_np is None:
        args.min_np = args.num_proc
    if args.elastic_timeout is None:
        args.elastic_timeout = _knob_seconds(os.environ, ELASTIC_TIMEOUT_ENV,
                                             ELASTIC_TIMEOUT_DEFAULT)


COOLDOWN_LIMITS = (1, 3600)  # the range MIN may start from and MAX may reach (Horovod's)


def check_cooldown_range(cooldown_range):
    """An error message for a bad --blacklist-cooldown-range, else None."""
    low, high = cooldown_range
    if low < COOLDOWN_LIMITS[0] or high > COOLDOWN_LIMITS[1] or low > high:
        return ("--blacklist-cooldown-range MIN MAX needs %d <= MIN <= MAX <= %d (seconds), "
                "got %s %s" % (COOLDOWN_LIMITS[0], COOLDOWN_LIMITS[1], low, high))
    return None


def _check_fault_tolerance(args):
    if args.max_restarts < 0:
        raise UsageError("--max-restarts must not be negative (got %d)" % args.max_restarts)
    _elastic_defaults(args)
    if args.min_np is not None:
        if not 1 <= args.min_np <= args.num_proc:
            raise UsageError("--min-np must be between 1 and -np %d (got %d)"
                             % (args.num_proc, args.min_np))
        if args.max_np is not None and args.max_np < args.num_proc:
            raise UsageError("--max-np %d is less than -np %d" % (args.max_np, args.num_proc))
        if args.mode == "mpi" or args.max_restarts:
            raise UsageError("--min-np (elastic) works in Gloo mode, without --max-restarts")
    elif args.max_np is not None or args.reset_limit is not None:
        raise UsageError("--max-np and --reset-limit need --min-np or "
                         "--host-discovery-script (an elastic run)")
    if args.blacklist_cooldown_range is not None:
        if args.min_np is None:
            raise UsageError("--blacklist-cooldown-range needs --min-np (an elastic run)")
        problem = check_cooldown_range(args.blacklist_cooldown_range)
        if problem:
            raise UsageError(problem)
    if args.slots_per_host < 1:
        raise UsageError("--slots-per-host must be at least 1 (got %d)" % args.slots_per_host)
    if args.reset_limit is not None and args.reset_limit < 0:
        raise UsageError("--reset-limit must not be negative (got %d)" % args.reset_limit)
    if args.elastic_timeout <= 0:
        raise UsageError("--elastic-timeout must be positive (got %s)" % args.elastic_timeout)
    if args.max_restarts and args.mode == "mpi":
        raise UsageError("--max-restarts works in Gloo mode only (mpiexec starts the ranks "
                         "under --mpi)")


_PYTHON_RE = re.compile(r"^python(\d+(\.\d+)*)?$")
# Interpreter options that consume the following argument.
_PYTHON_OPTS_WITH_VALUE = {"-W", "-X", "--check-hash-based-pycs"}


def python_script(command):
    """If ``command`` runs a Python script (``python [opts] script.py ...``), its path.

    Returns None for ``python -m mod``, ``python -c code``, ``python -`` and non-Python
    commands.
    """
    if not command:
        return None
    exe = command[0]
    is_python = bool(_PYTHON_RE.match(os.path.basename(exe)))
    if not is_python:
        try:
            is_python = os.path.realpath(exe) == os.path.realpath(sys.executable)
        except OSError:
            is_python = False
    if not is_python:
        return None
    i = 1
    while i < len(command):
        arg = command[i]
        if arg in ("-m", "-c", "-") or (arg.startswith(("-m", "-c")) and not arg.startswith("--")):
            return None
        if arg == "--":
            return command[i + 1] if i + 1 < len(command) else None
        if arg.startswith("-"):
            if arg in _PYTHON_OPTS_WITH_VALUE:
                i += 1
            i += 1
            continue
        return arg
    return None


def _check_nonnegative(value, flag):
    if value is not None and value < 0:
        raise UsageError("%s must not be negative (got %s)" % (flag, value))


def given_on_command_line(argv):
    """The ``dest`` names of the flags that ``argv`` sets (for --config-file: these win)."""
    p = build_parser()
    for action in p._actions:
        action.default = argparse.SUPPRESS
    given, _ = p.parse_known_args(argv)
    return set(vars(given))


def parse(argv):
    """Parse and check ``argv`` (without the program name). Raises UsageError."""
    args = build_parser().parse_args(argv)
    # One-line notices the launcher prints once (launch.main): config-file keys it
    # ignores, flags that do nothing here, deprecated spellings.
    args.notes = []
    if args.config_file:
        args.notes += config_file.apply(args, args.config_file, given_on_command_line(argv),
                                        _dest_actions(build_parser()))
    _choose_launch(args, os.environ)
    args.notes += parity.notices(args)
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    args.command = command
    if args.check_build:
        return args
    if args.num_proc is None:
        raise UsageError("the following arguments are required: -np/--num-proc (or run "
                         "inside an LSF job, which gives it)")
    if not command:
        raise UsageError("no command given to run (e.g. %s -np 2 python train.py)" % PROG)
    if args.num_proc < 1:
        raise UsageError("-np must be at least 1 (got %d)" % args.num_proc)
    if args.start_timeout is not None and args.start_timeout <= 0:
        raise UsageError("--start-timeout must be positive (got %s)" % args.start_timeout)
    _check_nonnegative(args.fusion_threshold_mb, "--fusion-threshold-mb")
    _check_nonnegative(args.cycle_time_ms, "--cycle-time-ms")
    _check_nonnegative(args.autotune_warmup_samples, "--autotune-warmup-samples")
    _check_nonnegative(args.autotune_gaussian_process_noise, "--autotune-gaussian-process-noise")
    for value, flag in ((args.autotune_steps_per_sample, "--autotune-steps-per-sample"),
                        (args.autotune_bayes_opt_max_samples,
                         "--autotune-bayes-opt-max-samples")):
        if value is not None and value < 1:
            raise UsageError("%s must be at least 1, got %s" % (flag, value))
    _check_nonnegative(args.cache_capacity, "--cache-capacity")
    _check_nonnegative(args.stall_check_warning_time_seconds,
                       "--stall-check-warning-time-seconds")
    _check_nonnegative(args.stall_check_shutdown_time_seconds,
                       "--stall-check-shutdown-time-seconds")
    if not 0 <= args.rendezvous_port < 65536:
        raise UsageError("--rendezvous-port must be between 0 and 65535 (got %d)"
                         % args.rendezvous_port)
    if args.ssh_port is not None and not 0 < args.ssh_port < 65536:
        raise UsageError("--ssh-port must be between 1 and 65535 (got %d)" % args.ssh_port)
    _check_horovodrun_flags(args)
    _check_fault_tolerance(args)
    return args


def _check_horovodrun_flags(args):
    _check_nonnegative(args.gloo_timeout_seconds, "--gloo-timeout-seconds")
    _check_nonnegative(args.thread_affinity, "--thread-affinity")
    _check_nonnegative(args.num_nccl_streams, "--num-nccl-streams")
    for flag, value in (("--mpi-args", args.mpi_args), ("--binding-args", args.binding_args)):
        if value is None:
            continue
        try:
            shlex.split(value)
        except ValueError as e:
            raise UsageError("%s %r: %s" % (flag, value, e))
    # The first interface names the rendezvous address (and Gloo's); kept under the
    # name the rest of the launcher reads.
    args.network_interface = args.nics[0] if args.nics else None


def _dest_actions(parser):
    """dest -> the action of the flag that sets it (for --config-file's values)."""
    return {a.dest: a for a in parser._actions if a.option_strings}


def _lsf_job_defaults(args, environ):
    """In an LSF job, -np defaults to the job's slots and the host list to its hosts
    (unless -H, --hostfile or --host-discovery-script was given), as in horovodrun.
    Raises ValueError for a malformed LSB_MCPU_HOSTS."""
    hosts = lsf_hosts.job_hosts(environ)
    if not hosts:
        return
    if args.num_proc is None:
        args.num_proc = sum(slots for _, slots in hosts)
    if (args.hosts is None and args.hostfile is None and
            args.host_discovery_script is None):
        args.hosts = ",".join("%s:%d" % pair for pair in hosts)


def _choose_launch(args, environ):
    """LSF job defaults, then the launch mode when neither --gloo, --mpi nor --jsrun (nor
    the config file's controller) chose it: MPI when --mpi-args or --binding-args were
    given (horovodrun applies them to the mpirun launch it picks by default), else Gloo.
    docs/launcher.md."""
    try:
        _lsf_job_defaults(args, environ)
    except ValueError as e:
        raise UsageError(str(e))
    if args.mode is None:
        wants_mpi = args.mpi_args is not None or args.binding_args is not None
        args.mode = "mpi" if wants_mpi else "gloo"
    elif args.mode == "gloo" and args.mpi_args is not None:
        args.notes.append("note: --mpi-args has no effect with --gloo (horovodrun "
                                  "ignores it there too)")
    if args.mode == "jsrun" and not lsf_hosts.in_lsf_job(environ):
        raise UsageError("--jsrun: no LSF job detected (LSB_JOBID is not set); jsrun starts "
                         "ranks inside an LSF job only: use --gloo or --mpi elsewhere")

"""Command-line interface of tfhvdrun: flags (named as in horovodrun) and their checks.

Every usage problem is reported as exactly one line ``tfhvdrun: error: <what>`` on
stderr with exit status 2 (:class:`UsageError` carries the message; ``parse`` raises
it, ``launch.main`` prints it).
"""

import argparse
import os
import re
import shutil
import sys

PROG = "tfhvdrun"
LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "FATAL")


class UsageError(Exception):
    """Bad command line; str(e) is the one-line message (without the prefix)."""


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


def build_parser():
    p = _Parser(
        prog=PROG,
        usage="%(prog)s -np N [-H host1:2,host2:2 | --hostfile FILE] [--gloo | --mpi] "
              "[options] command [args ...]",
        description="Run a tf_hvd (Horovod-style) training program on N processes. "
                    "Flags follow horovodrun.")
    p.add_argument("-np", "--num-proc", dest="num_proc", type=_integer, required=True,
                   metavar="N", help="number of processes (ranks) to start")
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
    p.add_argument("-p", "--ssh-port", dest="ssh_port", type=_integer, metavar="PORT",
                   help="ssh port on the remote hosts")
    p.add_argument("-i", "--ssh-identity-file", dest="ssh_identity_file", metavar="FILE",
                   help="ssh identity (private key) file")
    p.add_argument("--start-timeout", dest="start_timeout", type=_number, metavar="SECONDS",
                   help="seconds the ranks wait for each other while connecting "
                        "(HOROVOD_GLOO_TIMEOUT_SECONDS)")
    p.add_argument("--network-interface", "--network-interfaces", dest="network_interface",
                   metavar="IFACE",
                   help="network interface for the Gloo transport and the rendezvous "
                        "address (HOROVOD_GLOO_IFACE)")
    p.add_argument("--rendezvous-port", dest="rendezvous_port", type=_integer, default=0,
                   metavar="PORT",
                   help="TCP port of the launcher's rendezvous server in Gloo mode "
                        "(default 0: any free port)")
    p.add_argument("--output-filename", dest="output_filename", metavar="DIR",
                   help="also write each rank's output to DIR/rank.<r>/stdout and stderr")
    p.add_argument("--verbose", dest="verbose", action="store_true",
                   help="print what the launcher does")
    knobs = p.add_argument_group("tuning (Horovod environment knobs)")
    knobs.add_argument("--fusion-threshold-mb", dest="fusion_threshold_mb", type=_number,
                       metavar="MB", help="tensor fusion buffer size (HOROVOD_FUSION_THRESHOLD)")
    knobs.add_argument("--cycle-time-ms", dest="cycle_time_ms", type=_number, metavar="MS",
                       help="background loop cycle time (HOROVOD_CYCLE_TIME)")
    knobs.add_argument("--cache-capacity", dest="cache_capacity", type=_integer,
                       metavar="N", help="response cache entries (HOROVOD_CACHE_CAPACITY)")
    knobs.add_argument("--disable-cache", dest="disable_cache", action="store_true",
                       help="disable the response cache (HOROVOD_CACHE_CAPACITY=0)")
    knobs.add_argument("--timeline-filename", dest="timeline_filename", metavar="FILE",
                       help="write a Chrome-trace timeline (HOROVOD_TIMELINE)")
    knobs.add_argument("--timeline-mark-cycles", dest="timeline_mark_cycles",
                       action="store_true",
                       help="mark cycles in the timeline (HOROVOD_TIMELINE_MARK_CYCLES)")
    knobs.add_argument("--log-level", dest="log_level", type=str.upper, choices=LOG_LEVELS,
                       metavar="LEVEL", help="core log level: " + ", ".join(LOG_LEVELS))
    knobs.add_argument("--no-stall-check", dest="no_stall_check", action="store_true",
                       help="disable the stall inspector (HOROVOD_STALL_CHECK_DISABLE=1)")
    knobs.add_argument("--stall-check-warning-time-seconds",
                       dest="stall_check_warning_time_seconds", type=_number,
                       metavar="S", help="HOROVOD_STALL_CHECK_TIME_SECONDS")
    knobs.add_argument("--stall-check-shutdown-time-seconds",
                       dest="stall_check_shutdown_time_seconds", type=_number,
                       metavar="S", help="HOROVOD_STALL_SHUTDOWN_TIME_SECONDS")
    knobs.add_argument("--hierarchical-allreduce", dest="hierarchical_allreduce",
                       action="store_true",
                       help="allreduce within each host, then across hosts "
                            "(HOROVOD_HIERARCHICAL_ALLREDUCE=1)")
    knobs.add_argument("--hierarchical-allgather", dest="hierarchical_allgather",
                       action="store_true",
                       help="allgather within each host, then across hosts "
                            "(HOROVOD_HIERARCHICAL_ALLGATHER=1)")
    p.add_argument("command", nargs=argparse.REMAINDER,
                   help="the program to run on every rank, e.g. python train.py")
    p.set_defaults(mode="gloo")
    return p


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


def parse(argv):
    """Parse and check ``argv`` (without the program name). Raises UsageError."""
    args = build_parser().parse_args(argv)
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("no command given to run (e.g. %s -np 2 python train.py)" % PROG)
    args.command = command
    if args.num_proc < 1:
        raise UsageError("-np must be at least 1 (got %d)" % args.num_proc)
    if args.start_timeout is not None and args.start_timeout <= 0:
        raise UsageError("--start-timeout must be positive (got %s)" % args.start_timeout)
    _check_nonnegative(args.fusion_threshold_mb, "--fusion-threshold-mb")
    _check_nonnegative(args.cycle_time_ms, "--cycle-time-ms")
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
    return args


def check_command_runs_here(command, cwd=None):
    """For ranks started on this machine: the program must exist.

    Raises UsageError for a missing executable or a missing ``python script.py``.
    """
    cwd = cwd or os.getcwd()
    exe = command[0]
    if os.sep in exe:
        path = exe if os.path.isabs(exe) else os.path.join(cwd, exe)
        if not os.path.exists(path):
            raise UsageError("command %r does not exist" % exe)
    elif shutil.which(exe) is None:
        raise UsageError("command %r not found on PATH" % exe)
    script = python_script(command)
    if script is not None:
        path = script if os.path.isabs(script) else os.path.join(cwd, script)
        if not os.path.exists(path):
            raise UsageError("python script %r does not exist (working directory %s)"
                             % (script, cwd))

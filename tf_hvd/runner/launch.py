"""tfhvdrun: start N ranks of a training program, Horovod style.

    tfhvdrun -np 4 -H server1:2,server2:2 python train.py

Gloo mode (default, gloo_run.py): this process serves the rendezvous KV store,
computes every rank's topology from the host list, starts local ranks as child
processes and remote ones over ssh, prefixes their output with the rank and supervises
them. MPI mode (--mpi, mpi_run.py): mpiexec starts the ranks.

Usage errors: one line ``tfhvdrun: error: ...`` and exit status 2. Before starting
anything, every remote host is tried with ``ssh HOST true``; a host that cannot be
reached is named with ssh's message (exit status 255).
Only the standard library is imported (no TensorFlow), so the launcher starts at once.
"""

import os
import sys

from ..job import host_spec
from ..job import rank_env
from .command_line import check_build
from .command_line.plan import read_command_line
from .command_line.usage import UsageError, notice
from .modes import gloo_run
from .modes import mpi_run
from .processes import output
from .processes import reaper
from .processes import ssh

USAGE_EXIT = 2
SSH_FAILED_EXIT = 255  # as ssh's own
def _leave_report(outcome, environ=None):
    """The failed job's line (the root cause first) in $TF_HVD_RUN_REPORT_FILE, if set:
    tf_hvd.run (run_func.py) raises it as the job's error."""
    path = (os.environ if environ is None else environ).get(rank_env.RUN_REPORT_FILE)
    if path and outcome.code != 0 and outcome.why:
        with open(path, "w") as f:
            f.write(outcome.why)


def _usage_error(message):
    sys.stderr.write("tfhvdrun: error: %s\n" % message)
    sys.stderr.flush()
    return USAGE_EXIT


def _check_build(config):
    """-cb: report what this build of tf_hvd supports."""
    verbose_log = (lambda m: sys.stderr.write("tfhvdrun: %s\n" % m)) if config.verbose \
        else None
    sys.stdout.write(check_build.report(check_build.built_features(verbose_log),
                                        config.verbose))
    sys.stdout.flush()
    return 0


def _start_output(config):
    """The ranks' output: --output-filename's folder, timestamps, quiet start-up lines,
    the width of the rank in file names. Raises OSError for a folder it cannot make."""
    if config.output_filename:
        os.makedirs(config.output_filename, exist_ok=True)
    output.set_timestamps(config.prefix_output_with_timestamp)
    output.set_quiet(rank_env.QUIET_TF_STARTUP in config.knobs)
    max_np = config.elastic.max_np if config.elastic is not None else None
    output.set_rank_count(max(config.num_proc, max_np or 0))


def main(argv=None):
    """Run tfhvdrun with ``argv`` (default sys.argv[1:]); return the exit code.

    One way through the launcher's rooms: the command line (LaunchConfig, then the Plan,
    which checks it against this machine), the processes' set-up (output, ssh), the
    mode (the run phase), which returns a RunOutcome."""
    try:
        config, plan = read_command_line(sys.argv[1:] if argv is None else argv)
    except (UsageError, host_spec.HostSpecError) as e:
        return _usage_error(str(e))
    if plan is None:
        return _check_build(config)
    try:
        _start_output(config)
    except OSError as e:
        return _usage_error("--output-filename %s: %s" % (config.output_filename,
                                                           e.strerror or e))
    # jsrun reaches the LSF job's hosts by itself (often where ssh is not allowed).
    failed = [] if config.mode == "jsrun" else ssh.check_hosts(
        plan.remote_hosts, config.ssh_port, config.ssh_identity_file)
    if failed:
        for host, message in failed:
            sys.stderr.write("tfhvdrun: error: cannot reach host %s over ssh: %s\n"
                             % (host, message))
        sys.stderr.flush()
        return SSH_FAILED_EXIT
    mode = mpi_run if config.mode in ("mpi", "jsrun") else gloo_run
    outcome = mode.run(plan)
    _leave_report(outcome)
    return outcome.code


def console_main():
    """Entry point of the ``tfhvdrun`` console script (and ``python -m tf_hvd.runner``):
    runs the job, then ends whatever process of it is still running (reaper.py)."""
    reaper.become_subreaper()
    code = 1
    try:
        code = main()
    finally:
        leftovers = reaper.end_descendants()
        if leftovers and code != 0:
            notice("ended %d process(es) the failed job left running: %s" % (
                len(leftovers), "; ".join("%d %s" % (pid, cmd[:100])
                                          for pid, cmd in leftovers[:5])))
    sys.exit(code)


if __name__ == "__main__":
    console_main()

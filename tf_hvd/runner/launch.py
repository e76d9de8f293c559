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

from .command_line import parser as cli
from .command_line import check_build
from ..job import rank_env
from .modes import gloo_run
from ..job import host_spec
from .command_line import launch_config
from .modes import mpi_run
from .processes import output
from .processes import reaper
from .processes import ssh
from .command_line.plan import Plan
from .command_line.usage import notice

USAGE_EXIT = 2
SSH_FAILED_EXIT = 255  # as ssh's own


def _usage_error(message):
    sys.stderr.write("tfhvdrun: error: %s\n" % message)
    sys.stderr.flush()
    return USAGE_EXIT


def prepare(config):
    """The Plan of a LaunchConfig, checked against this machine. Raises
    UsageError/HostSpecError."""
    plan = Plan(config)
    if plan.any_local:
        cli.check_command_runs_here(config.command)
    if config.output_filename:
        try:
            os.makedirs(config.output_filename, exist_ok=True)
        except OSError as e:
            raise cli.UsageError("--output-filename %s: %s"
                                 % (config.output_filename, e.strerror or e))
    if not plan.loopback_only:
        plan.launcher_address()  # reports a bad --network-interface now
    return plan


def _notices(config):
    for line in config.notes:
        notice(line)  # flags that do nothing here, ignored config keys: once each


def main(argv=None):
    """Run tfhvdrun with ``argv`` (default sys.argv[1:]); return the exit code."""
    if argv is None:
        argv = sys.argv[1:]
    try:
        config = launch_config.build(argv)
    except (cli.UsageError, host_spec.HostSpecError) as e:
        return _usage_error(str(e))
    if config.check_build:  # -cb: report and stop
        _notices(config)
        verbose_log = (lambda m: sys.stderr.write("tfhvdrun: %s\n" % m)) if config.verbose \
            else None
        sys.stdout.write(check_build.report(check_build.built_features(verbose_log),
                                            config.verbose))
        sys.stdout.flush()
        return 0
    try:
        plan = prepare(config)
    except (cli.UsageError, host_spec.HostSpecError) as e:
        return _usage_error(str(e))
    _notices(config)
    if plan.args.prefix_output_with_timestamp:
        output.set_timestamps(True)
    output.set_quiet(rank_env.QUIET_TF_STARTUP in plan.knobs)
    output.set_rank_count(max(plan.args.num_proc, getattr(plan.args, "max_np", None) or 0))
    # jsrun reaches the LSF job's hosts by itself (often where ssh is not allowed).
    failed = [] if plan.args.mode == "jsrun" else ssh.check_hosts(
        plan.remote_hosts(), plan.args.ssh_port, plan.args.ssh_identity_file)
    if failed:
        for host, message in failed:
            sys.stderr.write("tfhvdrun: error: cannot reach host %s over ssh: %s\n"
                             % (host, message))
        sys.stderr.flush()
        return SSH_FAILED_EXIT
    if plan.args.mode in ("mpi", "jsrun"):
        return mpi_run.run(plan).code
    return gloo_run.run(plan).code


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

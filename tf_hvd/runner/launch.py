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

from . import args as cli
from . import hosts as host_spec
from . import ssh
from .plan import Plan

USAGE_EXIT = 2
SSH_FAILED_EXIT = 255  # as ssh's own


def _usage_error(message):
    sys.stderr.write("tfhvdrun: error: %s\n" % message)
    sys.stderr.flush()
    return USAGE_EXIT


def prepare(argv):
    """Parse and check the command line; return a Plan. Raises UsageError/HostSpecError."""
    args = cli.parse(argv)
    if args.check_build:
        return args
    start_timeout = cli.start_timeout(args)
    if args.host_discovery_script and args.hosts is None and args.hostfile is None:
        # Elastic, placed by the script alone (Horovod): wait for -np slots.
        from .discovery import HostDiscovery, wait_for_slots
        args.discovered_hosts = wait_for_slots(
            HostDiscovery(args.host_discovery_script, args.slots_per_host),
            args.num_proc, args.elastic_timeout)
    plan = Plan(args)
    plan.start_timeout = start_timeout
    if plan.any_local:
        cli.check_command_runs_here(args.command)
    if args.output_filename:
        try:
            os.makedirs(args.output_filename, exist_ok=True)
        except OSError as e:
            raise cli.UsageError("--output-filename %s: %s"
                                 % (args.output_filename, e.strerror or e))
    if not plan.loopback_only:
        plan.launcher_address()  # reports a bad --network-interface now
    return plan


def main(argv=None):
    """Run tfhvdrun with ``argv`` (default sys.argv[1:]); return the exit code."""
    if argv is None:
        argv = sys.argv[1:]
    try:
        plan = prepare(argv)
    except (cli.UsageError, host_spec.HostSpecError) as e:
        return _usage_error(str(e))
    if not isinstance(plan, Plan):  # -cb: report and stop
        from . import check_build
        verbose_log = (lambda m: sys.stderr.write("tfhvdrun: %s\n" % m)) if plan.verbose else None
        sys.stdout.write(check_build.report(check_build.built_features(verbose_log),
                                            plan.verbose))
        sys.stdout.flush()
        return 0
    if plan.args.prefix_output_with_timestamp:
        from . import output
        output.set_timestamps(True)
    failed = ssh.check_hosts(plan.remote_hosts(), plan.args.ssh_port,
                             plan.args.ssh_identity_file)
    if failed:
        for host, message in failed:
            sys.stderr.write("tfhvdrun: error: cannot reach host %s over ssh: %s\n"
                             % (host, message))
        sys.stderr.flush()
        return SSH_FAILED_EXIT
    if plan.args.mode == "mpi":
        from . import mpi_run
        return mpi_run.run(plan)
    from . import gloo_run
    return gloo_run.run(plan)


def console_main():
    """Entry point of the ``tfhvdrun`` console script."""
    sys.exit(main())


if __name__ == "__main__":
    console_main()

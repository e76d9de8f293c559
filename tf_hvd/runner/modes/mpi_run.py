"""MPI mode: start the ranks with mpiexec (or jsrun) and watch them through their
status files.

The job's rank group is one process, mpiexec (processes/mpiexec_group.py: every rank
runs under rank_wrapper.py, which records its exit status, and its core which rank made
it stop); the agent and the static policy (runner/agent/) stop mpiexec when a rank fails
-- after the ranks the reports blame have ended by themselves, within a grace period --
and name the rank whose failure came first and those that stopped in consequence.
"""

import os
import shlex
import shutil
import sys
import tempfile

from . import cache
from ...job import rank_env
from ..agent import agent
from ..agent.outcome import RunOutcome
from ..agent.static_policy import StaticPolicy
from . import js_run
from . import mpiexec as mpi
from ..processes.mpiexec_group import MpiexecGroup, fault_records
from ..processes.output import log_line
from ..processes.signals import SignalCatcher

NOT_FOUND_EXIT = 2


def _ssh_args(config):
    """tfhvdrun's -p/-i as ssh options for mpiexec's ssh launcher."""
    extra = []
    if config.ssh_port is not None:
        extra += ["-p", str(config.ssh_port)]
    if config.ssh_identity_file:
        extra += ["-i", config.ssh_identity_file]
    return extra


def _not_found(message):
    sys.stderr.write("tfhvdrun: error: %s\n" % message)
    sys.stderr.flush()
    return RunOutcome(NOT_FOUND_EXIT)


def run(plan):
    """Run the job with mpiexec (--mpi) or jsrun (--jsrun); its RunOutcome."""
    config = plan.config
    env = rank_env.RankEnv(controller="mpi", knobs=plan.knobs).to_environ()
    if config.mode == "jsrun":
        jsrun = js_run.find_jsrun()
        if jsrun is None:
            return _not_found("--jsrun: jsrun not found on PATH (it comes with IBM Spectrum "
                              "MPI on LSF clusters; elsewhere use --mpi or --gloo)")

        def command(status_dir):
            wrapped = mpi.wrapped_command(config.command, config.num_proc, config.output_filename,
                                          status_dir, config.prefix_output_with_timestamp)
            rankfile = None if config.binding_args is not None else \
                js_run.write_rankfile(plan, status_dir)
            return js_run.jsrun_command(jsrun, wrapped, rankfile, config.mpi_args,
                                        config.binding_args)
        return _run_launcher(plan, command, env)
    mpiexec = mpi.find_mpiexec()
    if mpiexec is None:
        return _not_found("--mpi: mpiexec not found (looked in %s and on PATH)"
                          % os.path.dirname(sys.executable))
    launcher_cache = cache.LauncherCache.for_args(config)
    flavor = mpi.mpi_flavor(mpiexec, cache=launcher_cache)
    if config.verbose:
        log_line("%s is %s%s" % (mpiexec, flavor, " (cached check)" if launcher_cache.hits else ""))

    def command(status_dir):
        return mpi.mpiexec_command(mpiexec, flavor, config.num_proc, plan.mpi_hosts_arg(), env,
                                   config.command, output_dir=config.output_filename,
                                   status_dir=status_dir, mpi_args=config.mpi_args,
                                   binding_args=config.binding_args,
                                   prefix_timestamp=config.prefix_output_with_timestamp,
                                   ssh_args=_ssh_args(config), nics=config.nics)
    return _run_launcher(plan, command, env)


def _run_launcher(plan, build_argv, env):
    """Start ``build_argv(status_dir)`` (mpiexec or jsrun) and supervise its ranks."""
    status_dir = tempfile.mkdtemp(prefix="tfhvdrun-")
    try:
        with SignalCatcher() as signals:
            group = MpiexecGroup(signals, status_dir, plan.config.num_proc)
            job = MpiJob(plan, build_argv(status_dir), env, status_dir)
            return agent.run(plan, group, StaticPolicy(job))
    finally:
        shutil.rmtree(status_dir, ignore_errors=True)


class MpiJob(object):
    """MPI mode's side of the run (static_policy.py): one process starts every rank."""

    launcher = "mpiexec"
    start_timeout = None

    def __init__(self, plan, argv, env, status_dir):
        self.argv, self.env, self.status_dir = argv, env, status_dir
        self.size = plan.config.num_proc
        if plan.config.verbose:
            log_line(" ".join(shlex.quote(a) for a in argv))

    def prepare(self, restart):
        return None

    def starts(self, restart):
        yield agent.Start(None, None, self.argv, rank_env.process_env(os.environ, self.env),
                          None, None, None, None)

    @staticmethod
    def cannot_start(start, error):
        return "cannot start %s: %s" % (start.argv[0], error.strerror or error), 126

    def fault_records(self):
        return fault_records(self.status_dir)

    def ended(self, outcome):
        pass

    def close(self):
        pass

"""MPI mode: start the ranks with mpiexec and watch them through their status files.

mpiexec (Hydra) does not stop the other ranks when one exits with an error, and does
not say which rank it was. Every rank therefore runs under rank_wrapper.py, which
records its process group, when it printed a Python traceback and its exit status in
a private directory, and its core writes which rank made it stop (rank.<r>.fault, the
report Gloo mode gets through the store); this loop reads them, stops mpiexec (which
stops the ranks) when a rank fails -- after the ranks the reports blame have ended by
themselves, within a grace period -- and, should anything survive, kills the recorded
process groups; then it names the rank whose failure came first and those that stopped
in consequence (failures.py).
"""

import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from . import cache
from ...job import rank_env
from ..processes import failures
from . import js_run
from . import mpiexec as mpi
from ..processes.signals import SignalCatcher, signal_name
from ..processes.supervisor import describe_status, exit_code_for, log_line

NOT_FOUND_EXIT = 2


def _rank_files(status_dir, suffix):
    """(rank, path) of every rank.<r><suffix> file in status_dir so far."""
    try:
        names = os.listdir(status_dir)
    except OSError:
        return
    for name in names:
        middle = name[len("rank."):-len(suffix)]
        if name.startswith("rank.") and name.endswith(suffix) and middle.isdigit():
            yield int(middle), os.path.join(status_dir, name)


def read_status(status_dir, suffix):
    """{rank: (integer in rank.<r><suffix>, mtime_ns)} for the files written so far."""
    found = {}
    for rank, path in _rank_files(status_dir, suffix):
        try:
            with open(path) as f:
                value = int(f.read().strip())
            found[rank] = (value, os.stat(path).st_mtime_ns)
        except (ValueError, OSError):
            continue
    return found


def first_failure(exits):
    """(rank, code) of the earliest non-zero exit in read_status(..., '.exit'), or None."""
    bad = sorted((mtime, rank, code) for rank, (code, mtime) in exits.items() if code != 0)
    if not bad:
        return None
    return bad[0][1], bad[0][2]


def outcomes(status_dir, end_time_ns):
    """failures.Outcome of every rank that exited or printed a traceback (times in s).

    A rank with a traceback but no exit file was killed with its wrapper (no status
    written): it counts as stopped at ``end_time_ns``.
    """
    exits = read_status(status_dir, ".exit")
    tracebacks = read_status(status_dir, ".traceback")
    result = []
    for rank in sorted(set(exits) | set(tracebacks)):
        code, exit_ns = exits.get(rank, (-int(signal.SIGKILL), end_time_ns))
        tb = tracebacks.get(rank)
        result.append(failures.Outcome(rank, None, code, exit_ns / 1e9,
                                       tb[1] / 1e9 if tb else None))
    return result


def fault_records(status_dir):
    """rank -> failures.FaultRecord from the ranks' cores (rank.<r>.fault, written when a
    core stopped: which rank made it stop), as Gloo mode reads them from the store."""
    records = {}
    for rank, path in _rank_files(status_dir, ".fault"):
        try:
            with open(path, "rb") as f:
                record = failures.parse_record(f.read())
        except OSError:
            continue
        if record is not None:
            records[rank] = record
    return records


def _kill_groups(pgids, signum):
    own = os.getpgid(0)
    for pgid in pgids:
        if pgid <= 1 or pgid == own:
            continue
        try:
            os.killpg(pgid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def _signal_pid(pid, signum):
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


class _MpiJob(object):
    def __init__(self, popen, status_dir, num_proc, grace=3.0, poll_interval=0.05,
                 settle=0.5):
        self.popen = popen
        self.status_dir = status_dir
        self.num_proc = num_proc
        self.grace = grace
        self.settle = settle
        self.poll_interval = poll_interval
        self.failed = None
        self.terminated = 0
        self.signalled = None

    def _report_failure(self):
        """Name the rank that failed first (failures.py); return the exit code."""
        found = outcomes(self.status_dir, time.time_ns())
        records = fault_records(self.status_dir)
        blamed = failures.blame(found, records)
        if blamed is None:
            rank, code = self.failed
            log_line("rank %d %s" % (rank, describe_status(code)))
            return exit_code_for(code)
        root, consequences, first_exit = blamed
        message = failures.describe_blame(root, consequences, first_exit, records)
        if not consequences and self.terminated > 0:
            message += "; the other %d running rank(s) were terminated" % self.terminated
        log_line(message)
        return failures.exit_code_of(root, self.failed[1], first_exit, records)

    def kill_everything(self):
        pgids = [p for p, _ in read_status(self.status_dir, ".pgid").values()]
        _kill_groups(pgids + [self.popen.pid], signal.SIGKILL)

    def wait(self, signals):
        deadline = None
        killed = False
        stop_at = None  # when mpiexec gets SIGTERM after a rank's failure
        while True:
            for signum in signals.pop_all():
                if self.signalled is None and not killed:
                    self.signalled = signum
                    log_line("received %s, forwarding it to mpiexec" % signal_name(signum))
                    _signal_pid(self.popen.pid, signum)
                    deadline = time.monotonic() + self.grace
                else:
                    self.kill_everything()
                    killed = True
            rc = self.popen.poll()
            exits = read_status(self.status_dir, ".exit")
            failure = first_failure(exits)
            if failure and self.failed is None and self.signalled is None:
                self.failed = failure
                if rc is None:
                    # Stop mpiexec a moment later (the others' fault reports arrive), or
                    # once the ranks those reports blame have ended by themselves.
                    stop_at = time.monotonic() + min(self.settle, self.grace)
            if stop_at is not None and rc is None and self.signalled is None:
                now = time.monotonic()
                waiting = failures.culprits_named(fault_records(self.status_dir)) - \
                    set(exits)
                if now >= stop_at and (not waiting or now >= stop_at + self.grace):
                    stop_at = None
                    self.terminated = self.num_proc - len(exits)
                    _signal_pid(self.popen.pid, signal.SIGTERM)
                    deadline = now + self.grace
            if rc is not None:
                break
            if deadline is not None and not killed and time.monotonic() >= deadline:
                self.kill_everything()
                killed = True
            time.sleep(self.poll_interval)
        self.kill_everything()  # stragglers mpiexec did not take down
        if self.failed is not None:
            return self._report_failure()
        if self.signalled is not None:
            return 128 + int(self.signalled)
        if rc != 0:
            log_line("mpiexec %s" % describe_status(rc))
            return exit_code_for(rc)
        return 0


def _ssh_args(args):
    """tfhvdrun's -p/-i as ssh options for mpiexec's ssh launcher."""
    extra = []
    if args.ssh_port is not None:
        extra += ["-p", str(args.ssh_port)]
    if args.ssh_identity_file:
        extra += ["-i", args.ssh_identity_file]
    return extra


def _not_found(message):
    sys.stderr.write("tfhvdrun: error: %s\n" % message)
    sys.stderr.flush()
    return NOT_FOUND_EXIT


def run(plan):
    """Run the job with mpiexec (--mpi) or jsrun (--jsrun); return the launcher's exit
    code."""
    args = plan.args
    env = rank_env.RankEnv(controller="mpi", knobs=plan.knobs).to_environ()
    if args.mode == "jsrun":
        jsrun = js_run.find_jsrun()
        if jsrun is None:
            return _not_found("--jsrun: jsrun not found on PATH (it comes with IBM Spectrum "
                              "MPI on LSF clusters; elsewhere use --mpi or --gloo)")

        def command(status_dir):
            wrapped = mpi.wrapped_command(args.command, args.num_proc, args.output_filename,
                                          status_dir, args.prefix_output_with_timestamp)
            rankfile = None if args.binding_args is not None else \
                js_run.write_rankfile(plan, status_dir)
            return js_run.jsrun_command(jsrun, wrapped, rankfile, args.mpi_args,
                                        args.binding_args)
        return _run_launcher(plan, command, env)
    mpiexec = mpi.find_mpiexec()
    if mpiexec is None:
        return _not_found("--mpi: mpiexec not found (looked in %s and on PATH)"
                          % os.path.dirname(sys.executable))
    launcher_cache = cache.LauncherCache.for_args(args)
    flavor = mpi.mpi_flavor(mpiexec, cache=launcher_cache)
    if args.verbose:
        log_line("%s is %s%s" % (mpiexec, flavor, " (cached check)" if launcher_cache.hits else ""))

    def command(status_dir):
        return mpi.mpiexec_command(mpiexec, flavor, args.num_proc, plan.mpi_hosts_arg(), env,
                                   args.command, output_dir=args.output_filename,
                                   status_dir=status_dir, mpi_args=args.mpi_args,
                                   binding_args=args.binding_args,
                                   prefix_timestamp=args.prefix_output_with_timestamp,
                                   ssh_args=_ssh_args(args), nics=args.nics)
    return _run_launcher(plan, command, env)


def _run_launcher(plan, build_argv, env):
    """Start ``build_argv(status_dir)`` (mpiexec or jsrun) and supervise its ranks."""
    args = plan.args
    status_dir = tempfile.mkdtemp(prefix="tfhvdrun-")
    argv = build_argv(status_dir)
    if args.verbose:
        log_line(" ".join(shlex.quote(a) for a in argv))
    signals = SignalCatcher()
    signals.install()
    try:
        try:
            popen = subprocess.Popen(argv, env=rank_env.process_env(os.environ, env),
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as e:
            log_line("cannot start %s: %s" % (argv[0], e.strerror or e))
            return 126
        return _MpiJob(popen, status_dir, args.num_proc).wait(signals)
    finally:
        signals.restore()
        shutil.rmtree(status_dir, ignore_errors=True)

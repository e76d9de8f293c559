"""A rank group of one process, mpiexec (or jsrun), that starts the ranks itself.

mpiexec (Hydra) does not stop the other ranks when one exits with an error, and does
not say which rank it was. Every rank therefore runs under rank_wrapper.py, which
records its process group, when it printed a Python traceback and its exit status in
a private directory (``status_dir``), and its core writes which rank made it stop
(rank.<r>.fault, the report Gloo mode gets through the store). This group reads those
files: a rank's exit is a RankExited event (its failures.Outcome); a stop signals
mpiexec (which stops the ranks); a kill also kills the recorded process groups.

    group = MpiexecGroup(SignalCatcher(), status_dir, size=4)
    group.start(None, None, mpiexec_argv, env)
"""

import os
import signal
import subprocess
import time

from tf_hvd.job import fault_record
from . import failures
from .events import RankExited, Signalled, Tick
from .rank_group import NEVER, signal_group
from .signals import SignalCatcher


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
    """rank -> FaultRecord (tf_hvd.job.fault_record) from the ranks' cores (rank.<r>.fault,
    written when a core stopped: which rank made it stop), as Gloo mode reads the store."""
    records = {}
    for rank, path in _rank_files(status_dir, ".fault"):
        try:
            with open(path, "rb") as f:
                record = fault_record.parse(f.read(), rank)
        except OSError:
            continue
        if record is not None:
            records[rank] = record
    return records


class Launcher(object):
    """The group's one process (the Rank of a RankGroup has the same fields)."""

    def __init__(self, popen):
        self.popen, self.rank, self.host = popen, None, None
        self.returncode = None


class MpiexecGroup(object):
    stops_each_rank = False  # a stop reaches every rank (through mpiexec)

    def __init__(self, signals=None, status_dir=None, size=0, grace=3.0,
                 poll_interval=0.05):
        self.signals = signals if signals is not None else SignalCatcher()
        self.status_dir, self.size = status_dir, size
        self.grace, self.poll_interval = grace, poll_interval
        self.launcher = None
        self.seen = set()  # ranks whose exit was reported
        self.kill_at = NEVER

    def start(self, rank, host, argv, env, cwd=None, output_dir=None, stdin_data=None,
              redact=None):
        """Start mpiexec (``argv``); raises OSError when it cannot be started."""
        self.launcher = Launcher(subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                                  start_new_session=True))
        return self.launcher

    def running(self):
        return [self.launcher] if self.launcher and self.launcher.returncode is None else []

    def events(self):
        """Wait one poll interval; then the signals received, the ranks that ended
        (oldest first) and a Tick."""
        time.sleep(self.poll_interval)
        events = [Signalled(s) for s in self.signals.pop_all()]
        if self.launcher is not None and self.launcher.returncode is None:
            self.launcher.returncode = self.launcher.popen.poll()
        exits = read_status(self.status_dir, ".exit")
        for _, rank, code in sorted((m, r, c) for r, (c, m) in exits.items()
                                    if r not in self.seen):
            self.seen.add(rank)
            events.append(RankExited(failures.Outcome(rank, None, code, None, None)))
        if self.running() and time.monotonic() >= self.kill_at:
            self.kill_at = NEVER
            self.kill()
        return events + [Tick()]

    def _signal(self, signum):
        try:
            os.kill(self.launcher.popen.pid, signum)
        except ProcessLookupError:
            pass

    def stop(self, ranks, term_in=0.0, kill_in=None):
        """SIGTERM mpiexec now (the ranks follow); kill everything ``grace`` s later."""
        if ranks and self.running():
            self._signal(signal.SIGTERM)
            self.kill_at = min(self.kill_at, time.monotonic() + self.grace)

    def forward(self, signum):
        if self.running():
            self._signal(signum)
            self.kill_at = min(self.kill_at, time.monotonic() + self.grace)

    def kill(self):
        """SIGKILL mpiexec's and every recorded rank's process group."""
        own = os.getpgid(0)
        pgids = [p for p, _ in read_status(self.status_dir, ".pgid").values()]
        for pgid in pgids + ([self.launcher.popen.pid] if self.launcher else []):
            if pgid > 1 and pgid != own:
                signal_group(pgid, signal.SIGKILL)

    def outcomes(self):
        return outcomes(self.status_dir, time.time_ns())

    def clear(self):
        self.launcher, self.seen, self.kill_at = None, set(), NEVER

    def abort(self):
        self.cleanup()

    def cleanup(self):
        """Kill the stragglers mpiexec did not take down."""
        if self.launcher is not None:
            self.kill()
            if self.launcher.returncode is None:
                self.launcher.returncode = self.launcher.popen.wait()

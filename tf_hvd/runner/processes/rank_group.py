"""The ranks' processes: start them, poll them, signal them, stop them in stages.

The group decides nothing: the agent (runner/agent/) carries out what its policy answers
to the events the group reports (events.py). What the group does, as horovodrun does:

* every rank runs in its own session / process group, so signals reach a rank and
  everything it started, and a Ctrl-C in the terminal reaches only the launcher, which
  forwards it (``forward``);
* a stop comes in stages: SIGTERM (now or later), then SIGKILL ``grace`` s after it
  unless the rank ended by itself (``stop``);
* when the group is done, whatever is left in the ranks' process groups is killed, so no
  process survives the launcher (``cleanup``), nor the launcher's SIGKILL
  (PR_SET_PDEATHSIG on Linux: the ranks get SIGTERM).

    group = RankGroup(SignalCatcher())
    group.start(0, "localhost", ["python", "train.py"], env)
    events = group.events()    # [Tick()], [Signalled(2), Tick(), RankExited(rank)]...
"""

import os
import signal
import socket
import subprocess
import sys
import threading
import time

from tf_hvd.job.parent_death import pdeathsig_setter
from . import failures
from . import output
from .events import RankExited, Signalled, Tick
from .signals import SignalCatcher

NEVER = float("inf")


_set_pdeathsig = pdeathsig_setter(signal.SIGTERM)
_THIS_MACHINE = ("localhost", "127.0.0.1", socket.gethostname())


def signal_group(pgid, signum):
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


class Rank(object):
    """One rank's process: ``returncode`` once it ended (set by RankGroup.events)."""
    def __init__(self, rank, host, popen):
        self.rank, self.host, self.popen = rank, host, popen
        self.threads = []
        self.returncode = None
        self.term_at = self.kill_at = NEVER  # stages of a stop under way
        self.exit_time = None        # time.monotonic() when the process ended
        self.traceback_time = None   # ... when it first printed a Python traceback
        self._waiter = threading.Thread(target=self._wait, name="tf_hvd-wait%d" % rank,
                                        daemon=True)
        self._waiter.start()

    def _wait(self):
        self.popen.wait()
        self.exit_time = time.monotonic()

    def note_stderr_line(self, line):
        if self.traceback_time is None and failures.is_traceback_line(line):
            self.traceback_time = time.monotonic()

    def outcome(self):
        # A remote rank's process here is its ssh (or srun): its pid would mislead.
        pid = self.popen.pid if self.host in _THIS_MACHINE else None
        return failures.Outcome(self.rank, self.host, self.returncode, self.exit_time,
                                self.traceback_time, pid)


class RankGroup(object):
    stops_each_rank = True  # a stop reaches the ranks named, not all at once

    def __init__(self, signals=None, grace=3.0, poll_interval=0.05):
        self.signals = signals if signals is not None else SignalCatcher()
        self.grace, self.poll_interval = grace, poll_interval
        self.ranks = []

    def start(self, rank, host, argv, env, cwd=None, output_dir=None, stdin_data=None,
              redact=None):
        """Start one rank; its stdout/stderr are forwarded with the rank prefix.

        ``stdin_data`` (bytes) is written to the rank's stdin, which is then closed
        (otherwise stdin is /dev/null); ``redact`` is masked in the rank's output.
        Returns the Rank; raises OSError when the program cannot be started.
        """
        popen = subprocess.Popen(
            argv, env=env, cwd=cwd,
            stdin=subprocess.DEVNULL if stdin_data is None else subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True, preexec_fn=_set_pdeathsig)
        try:
            if stdin_data is not None:  # a few bytes: fits in the pipe buffer
                popen.stdin.write(stdin_data)
                popen.stdin.close()
        except OSError:
            pass  # the rank already exited: its status tells the story
        proc = Rank(rank, host, popen)
        proc.threads = [
            output.forward(popen.stdout, rank, "stdout", sys.stdout.buffer, output_dir,
                           redact),
            output.forward(popen.stderr, rank, "stderr", sys.stderr.buffer, output_dir,
                           redact, on_line=proc.note_stderr_line),
        ]
        self.ranks.append(proc)
        return proc

    def running(self):
        return [p for p in self.ranks if p.returncode is None]

    def events(self):
        """Wait one poll interval; then the signals received, the ranks that ended (in
        rank order) and a Tick. Carries out the stages of the stops under way."""
        time.sleep(self.poll_interval)
        events = [Signalled(s) for s in self.signals.pop_all()]
        exited = [p for p in self.running() if p.exit_time is not None]  # reaped
        for proc in sorted(exited, key=lambda p: p.rank):
            proc.returncode = proc.popen.returncode
            events.append(RankExited(proc))
        now = time.monotonic()
        for proc in self.running():
            if proc.term_at <= now:
                proc.term_at = NEVER
                signal_group(proc.popen.pid, signal.SIGTERM)
            if proc.kill_at <= now:
                proc.kill_at = NEVER
                signal_group(proc.popen.pid, signal.SIGKILL)
        return events + [Tick()]

    def stop(self, ranks, term_in=0.0, kill_in=None):
        """SIGTERM ``ranks`` ``term_in`` s from now, SIGKILL ``kill_in`` s from now
        (default: ``grace`` s after the SIGTERM) if they are still running."""
        now = time.monotonic()
        for proc in ranks:
            if proc.returncode is None:
                proc.term_at = min(proc.term_at, now + term_in)
                proc.kill_at = min(proc.kill_at, now + (term_in + self.grace
                                                        if kill_in is None else kill_in))
                if term_in <= 0:
                    proc.term_at = NEVER
                    signal_group(proc.popen.pid, signal.SIGTERM)

    def forward(self, signum):
        """Send ``signum`` (the launcher's own) to every running rank now; SIGKILL
        ``grace`` s later."""
        kill_at = time.monotonic() + self.grace
        for proc in self.running():
            signal_group(proc.popen.pid, signum)
            proc.kill_at = min(proc.kill_at, kill_at)

    def kill(self):
        """SIGKILL every running rank now."""
        for proc in self.running():
            signal_group(proc.popen.pid, signal.SIGKILL)

    def outcomes(self):
        """failures.Outcome of every rank that ended."""
        return [p.outcome() for p in self.ranks if p.returncode is not None]

    def clear(self):
        """Forget the ranks of a run that is over (the group starts again)."""
        self.ranks = []

    def abort(self):
        """Stop the ranks started so far (a later one cannot start)."""
        self.stop(self.running())
        deadline = time.monotonic() + self.grace
        while time.monotonic() < deadline and [p for p in self.running()
                                               if p.exit_time is None]:
            time.sleep(self.poll_interval)
        self.cleanup()

    def cleanup(self):
        """Kill what is left in the ranks' process groups; drain the output threads."""
        for proc in self.running():
            signal_group(proc.popen.pid, signal.SIGKILL)
            proc.returncode = proc.popen.wait()
            proc._waiter.join(5)
            if proc.exit_time is None:
                proc.exit_time = time.monotonic()
        for proc in self.ranks:
            signal_group(proc.popen.pid, signal.SIGKILL)
        end = time.monotonic() + 5.0
        for proc in self.ranks:
            for t in proc.threads:
                t.join(max(0.0, end - time.monotonic()))

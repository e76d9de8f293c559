"""Starting the ranks' processes and watching them until all are done.

Policy (the same as horovodrun's, stated precisely):

* every rank runs in its own session / process group, so signals reach a rank and
  everything it started, and a Ctrl-C in the terminal reaches only the launcher, which
  forwards it exactly once;
* SIGINT/SIGTERM/SIGHUP received by the launcher are forwarded to every rank's group;
  a second signal kills them (SIGKILL);
* when a rank exits with a non-zero status (and we are not already stopping), the
  others get SIGTERM ``settle`` seconds later (ranks failing at the same moment, such
  as a remote rank whose status comes over ssh, end with their own status) and,
  ``grace`` seconds later, SIGKILL -- except the ranks that the failed ranks' cores
  named as the cause (fault records, failures.py), which are given
  ``grace`` seconds to end by themselves first, so that their own exit status is known;
  once all are gone, one line names the rank whose failure came first, how it ended, and
  the ranks that stopped in consequence (failures.blame);
* when all ranks are gone, whatever is left in their process groups is killed, so no
  process survives the launcher;
* exit code: the failed rank's code (128+N for a rank killed by signal N; the first
  non-zero code if the named rank was stopped by the launcher), 128+N when the launcher
  was stopped by signal N, else 0.

Ranks are also started with PR_SET_PDEATHSIG (Linux) so they get SIGTERM should the
launcher itself be killed with SIGKILL.
"""

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time

from . import failures
from . import output
from .signals import SignalCatcher, signal_name


def _make_pdeathsig_setter():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    PR_SET_PDEATHSIG = 1
    sig = int(signal.SIGTERM)

    def set_pdeathsig():
        prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)

    return set_pdeathsig


_set_pdeathsig = _make_pdeathsig_setter()


describe_status = failures.describe_status


def exit_code_for(returncode):
    return returncode if returncode >= 0 else 128 - returncode


def log_line(message):
    """Write ``tfhvdrun: <message>`` to stderr as one line, not inside a rank's line."""
    dest = sys.stderr.buffer
    with output.lock_for(dest):
        try:
            sys.stderr.flush()
            dest.write(("tfhvdrun: %s\n" % message).encode("utf-8", "replace"))
            dest.flush()
        except (OSError, ValueError):
            pass


class RankProcess(object):
    def __init__(self, rank, host, popen, threads=()):
        self.rank = rank
        self.host = host
        self.popen = popen
        self.threads = list(threads)
        self.returncode = None
        self.retired = False         # stopped by an elastic launcher: its exit is no failure
        self.retire_kill_at = None   # ... and SIGKILLed then if still running
        self.retire_term_at = None   # ... SIGTERMed then (it was asked to leave by itself)
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
        return failures.Outcome(self.rank, self.host, self.returncode, self.exit_time,
                                self.traceback_time)

    @property
    def pid(self):
        return self.popen.pid


class Supervisor(object):
    def __init__(self, signals=None, grace=3.0, poll_interval=0.05, log=None,
                 fault_records=None, elastic=None, tick=None, on_rank_lost=None, settle=0.5,
                 state_lost=None):
        """``fault_records()``: rank -> failures.FaultRecord reported by the ranks' cores
        so far (none when not given). ``elastic``: None, or an object with ``min_np``,
        ``timeout`` and ``reset_limit`` (None: no limit): a failed rank then does not end
        the job while at least min_np ranks are left (tf_hvd.elastic re-forms it).
        ``state_lost()``: the final line when no rank left holds an elastic job's committed
        state (the job then fails instead of going on), else None."""
        self.elastic = elastic
        self._state_lost = state_lost
        self.lost_report = None      # the job failed because its committed state was lost
        self._stop_requested = False
        self._tick = tick  # called every poll while the job runs (elastic host discovery)
        self._on_rank_lost = on_rank_lost  # called with each rank an elastic run lost
        self.resets = 0
        self._elastic_failed = []
        self._short_since = None
        self._none_left = False  # an elastic job ended because every rank failed
        self.grace = grace
        self.settle = settle
        self._fault_records = fault_records or dict
        self.poll_interval = poll_interval
        self._log = log or log_line
        self.signals = signals if signals is not None else SignalCatcher()
        self.procs = []
        self.failed = None          # RankProcess that failed first
        self.signalled = None       # signal number that stopped the launcher
        self.report = None          # the line naming the failure, once logged

    # -- starting --------------------------------------------------------------
    def spawn(self, rank, host, argv, env, cwd=None, output_dir=None, stdin_data=None,
              redact=None):
        """Start one rank; its stdout/stderr are forwarded with the rank prefix.

        ``stdin_data`` (bytes) is written to the rank's stdin, which is then closed
        (otherwise stdin is /dev/null); ``redact`` is masked in the rank's output.
        Raises OSError when the program cannot be started.
        """
        popen = subprocess.Popen(
            argv, env=env, cwd=cwd,
            stdin=subprocess.DEVNULL if stdin_data is None else subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True, preexec_fn=_set_pdeathsig)
        if stdin_data is not None:
            try:
                popen.stdin.write(stdin_data)  # a few bytes: fits in the pipe buffer
                popen.stdin.close()
            except OSError:
                pass  # the rank already exited: its status tells the story
        proc = RankProcess(rank, host, popen)
        proc.threads = [
            output.forward(popen.stdout, rank, "stdout", sys.stdout.buffer, output_dir,
                           redact),
            output.forward(popen.stderr, rank, "stderr", sys.stderr.buffer, output_dir,
                           redact, on_line=proc.note_stderr_line),
        ]
        self.procs.append(proc)
        return proc

    # -- signalling -----------------------------------------------------------
    @staticmethod
    def _signal_proc(proc, signum):
        try:
            os.killpg(proc.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def retire(self, procs, after=None):
        """Elastic runs: stop ``procs`` (their host failed or left the discovered hosts);
        their exit is not a failure. SIGTERM now (or ``after`` seconds from now, when they
        were asked to leave by themselves), SIGKILL ``grace`` seconds later."""
        for proc in procs:
            if proc.returncode is None and not proc.retired:
                proc.retired = True
                if after is not None:
                    proc.retire_term_at = time.monotonic() + after
                    proc.retire_kill_at = float("inf")
                    continue
                proc.retire_kill_at = time.monotonic() + self.grace
                self._signal_proc(proc, signal.SIGTERM)

    def _kill_retired_late(self):
        now = time.monotonic()
        for proc in self.procs:
            if proc.retired and proc.returncode is None and proc.retire_term_at is not None \
                    and proc.retire_term_at <= now:
                proc.retire_term_at = None
                proc.retire_kill_at = now + self.grace
                self._signal_proc(proc, signal.SIGTERM)
            if proc.retired and proc.returncode is None and proc.retire_kill_at <= now:
                proc.retire_kill_at = float("inf")
                self._signal_proc(proc, signal.SIGKILL)

    def _signal_groups(self, signum, only_running=True):
        for proc in self.procs:
            if only_running and proc.returncode is not None:
                continue
            try:
                os.killpg(proc.pid, signum)
            except (ProcessLookupError, PermissionError):
                pass

    # -- waiting ---------------------------------------------------------------
    def _poll(self):
        """Reap exited ranks; return (list of running, list of newly exited)."""
        running, exited = [], []
        for proc in self.procs:
            if proc.returncode is not None:
                continue
            if proc.exit_time is None:  # set by the waiter thread once reaped
                running.append(proc)
            else:
                proc.returncode = proc.popen.returncode
                exited.append(proc)
        return running, exited

    def wait(self):
        """Block until every rank is gone; return the launcher's exit code."""
        deadline = None
        killed = False
        term_later, term_later_at = [], None
        stop_at = None  # when the ranks left get SIGTERM after a failure
        try:
            while True:
                for signum in self.signals.pop_all():
                    if self.signalled is None and not killed:
                        self.signalled = signum
                        self._log("received %s, forwarding it to all ranks"
                                  % signal_name(signum))
                        self._signal_groups(signum)
                        deadline = time.monotonic() + self.grace
                    else:
                        self._signal_groups(signal.SIGKILL)
                        killed = True
                if self._tick is not None and self.failed is None and \
                        self.signalled is None and self.lost_report is None:
                    self._tick()
                running, exited = self._poll()
                if self._stop_requested:
                    self._stop_requested = False
                    for p in running:
                        self._signal_proc(p, signal.SIGTERM)
                    deadline = time.monotonic() + self.grace
                for proc in sorted(exited, key=lambda p: p.rank):
                    if (proc.returncode != 0 and self.failed is None
                            and self.signalled is None and not proc.retired
                            and self.lost_report is None):
                        if self.elastic is not None and self._elastic_goes_on(proc, running):
                            continue
                        self.failed = proc
                        # The others are stopped a moment later: a rank failing by itself
                        # at the same time (one on another host, whose exit status comes
                        # over ssh) ends with its own status, and the survivors' fault
                        # records have time to reach the store.
                        stop_at = time.monotonic() + min(self.settle, self.grace)
                if stop_at is not None and (self.signalled is not None or killed):
                    stop_at = None  # the launcher's own stop (a signal) is under way
                if stop_at is not None and time.monotonic() >= stop_at:
                    stop_at = None
                    # A rank the others blame is ending by itself: let it.
                    named = failures.culprits_named(self._fault_records())
                    term_later = [p for p in running if p.rank in named]
                    for p in running:
                        if p not in term_later:
                            self._signal_proc(p, signal.SIGTERM)
                    now = time.monotonic()
                    term_later_at = now + self.grace
                    deadline = now + self.grace * (2 if term_later else 1)
                if self.elastic is not None:
                    self._kill_retired_late()
                    if self._short_since is not None and \
                            self._active(running) >= self.elastic.min_np:
                        self._short_since = None  # enough ranks again (new ones joined)
                if (self._short_since is not None and self.failed is None and running and
                        time.monotonic() - self._short_since >= self.elastic.timeout):
                    self._log("stopping the job: only %d rank(s) left for %g s "
                              "(--elastic-timeout), fewer than --min-np %d"
                              % (len(running), self.elastic.timeout, self.elastic.min_np))
                    self.failed = self._elastic_failed[0]
                    for p in running:
                        self._signal_proc(p, signal.SIGTERM)
                    deadline = time.monotonic() + self.grace
                if not running:
                    break
                if term_later and time.monotonic() >= term_later_at:
                    for p in term_later:
                        if p.returncode is None:
                            self._signal_proc(p, signal.SIGTERM)
                    term_later = []
                if deadline is not None and not killed and time.monotonic() >= deadline:
                    self._signal_groups(signal.SIGKILL)
                    killed = True
                time.sleep(self.poll_interval)
        finally:
            self.cleanup()
        if self.lost_report is not None and self.signalled is None:
            self.report = self.lost_report
            self._log(self.report)
            holders = [p for p in self._elastic_failed if p.returncode]
            return exit_code_for(holders[0].returncode) if holders else 1
        if (self.failed is None and self._elastic_failed and self.signalled is None and
                not any(p.returncode == 0 and not p.retired for p in self.procs)):
            self.failed = self._elastic_failed[0]  # every rank failed in the end
        if self.failed is not None:
            return self._report_failure()
        if self.signalled is not None:
            return 128 + int(self.signalled)
        return 0

    def stop_job(self, report):
        """Elastic runs: end the job as failed (its committed state is lost); ``report``
        is the final line. The ranks get SIGTERM at the next poll, SIGKILL ``grace`` s
        later."""
        if self.lost_report is None:
            self.lost_report = report
            self._stop_requested = True

    @staticmethod
    def _active(running):
        return len([p for p in running if not p.retired])

    def _elastic_goes_on(self, proc, running):
        """An elastic run lost ``proc``: log it; False when the job must end now."""
        self.resets += 1
        self._elastic_failed.append(proc)
        what = failures.describe(proc.outcome())
        limit = self.elastic.reset_limit
        lines = []
        if self._on_rank_lost is not None:  # blacklists its host, stops the ranks there
            lines = self._on_rank_lost(proc) or []
        try:
            return self._elastic_decision(proc, [p for p in running if not p.retired], what,
                                          limit)
        finally:
            for line in lines:
                self._log(line)

    def _elastic_decision(self, proc, running, what, limit):
        if not running:  # Horovod: every rank failed, the job ends (no waiting)
            self._log("%s; no rank is left: stopping the job (every rank failed or was "
                      "stopped)" % what)
            self._none_left = True
            return False
        lost = self._state_lost() if self._state_lost is not None else None
        if lost is not None:
            self._log("%s; no rank left holds the job's committed state: stopping the job"
                      % what)
            self.stop_job(lost)
            return True
        if limit is not None and self.resets > limit:
            self._log("%s; stopping the job: it has been reset %d time(s), more than "
                      "--reset-limit %d allows" % (what, self.resets, limit))
            return False
        if len(running) < self.elastic.min_np:
            if self._short_since is None:
                self._short_since = time.monotonic()
            self._log("%s; %d rank(s) left, fewer than --min-np %d: waiting up to %g s "
                      "(--elastic-timeout)" % (what, len(running), self.elastic.min_np,
                                               self.elastic.timeout))
            return True
        self._log("%s; the job goes on with the %d rank(s) left (elastic reset %d)"
                  % (what, len(running), self.resets))
        return True

    def _report_failure(self):
        """Name the rank whose failure came first and those that stopped in consequence
        (failures.py); return the exit code."""
        if self._none_left:  # an elastic job: each failure was its own, name them all
            lost = [p for p in self.procs if p.returncode and not p.retired]
            self.report = "the job failed: every rank failed or was stopped: %s" % "; ".join(
                failures.describe(p.outcome()) for p in lost)
            self._log(self.report)
            return exit_code_for(self._elastic_failed[0].returncode)
        outcomes = [p.outcome() for p in self.procs if p.returncode is not None]
        records = self._fault_records()
        found = failures.blame(outcomes, records)
        if found is None:  # cannot happen (self.failed exited non-zero); be safe
            found = (self.failed.outcome(), [], self.failed.exit_time)
        root, consequences, first_exit = found
        self.report = failures.describe_blame(root, consequences, first_exit, records)
        self._log(self.report)
        return failures.exit_code_of(root, self.failed.returncode, first_exit, records)

    def abort(self):
        """Stop the ranks started so far (used when a later one cannot start)."""
        self._signal_groups(signal.SIGTERM)
        deadline = time.monotonic() + self.grace
        while time.monotonic() < deadline and self._poll()[0]:
            time.sleep(self.poll_interval)
        self.cleanup()

    def cleanup(self):
        """Kill what is left in the ranks' process groups; drain the output threads."""
        for proc in self.procs:
            if proc.returncode is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                proc.returncode = proc.popen.wait()
                proc._waiter.join(5)
                if proc.exit_time is None:
                    proc.exit_time = time.monotonic()
        self._signal_groups(signal.SIGKILL, only_running=False)
        end = time.monotonic() + 5.0
        for proc in self.procs:
            for t in proc.threads:
                t.join(max(0.0, end - time.monotonic()))

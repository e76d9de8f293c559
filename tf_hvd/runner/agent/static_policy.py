"""What a job of fixed size does when a rank fails or the launcher gets a signal.

The same rules as horovodrun's, stated precisely:

* SIGINT/SIGTERM/SIGHUP received by the launcher are forwarded to every rank (to
  mpiexec, which forwards them); a second signal kills them (SIGKILL);
* when a rank exits with a non-zero status (and we are not already stopping), the
  others get SIGTERM ``settle`` seconds later (ranks failing at the same moment, such
  as a remote rank whose status comes over ssh, end with their own status) and,
  ``grace`` seconds later, SIGKILL -- except the ranks that the failed ranks' cores
  named as the cause (fault records, failures.py), which are given ``grace`` seconds to
  end by themselves first, so that their own exit status is known (under mpiexec, which
  stops every rank at once, mpiexec is stopped once they have ended, or after ``grace``);
  once all are gone, one line names the rank whose failure came first, how it ended, and
  the ranks that stopped in consequence (failures.blame);
* a rank that the others' cores declare silent (no liveness proof for
  HOROVOD_PEER_TIMEOUT_SECONDS: it is stopped, or its host is cut off) never ends by
  itself: it is SIGKILLed as soon as the first record says so (a remote rank's ssh
  session, so no wait on an unreachable host), not given ``grace`` to end, and named
  as "stopped answering" (tf_hvd/job/silent_ranks.py); under mpiexec the job is stopped
  without waiting for it;
* exit code: the failed rank's code (128+N for a rank killed by signal N; the first
  non-zero code if the named rank was stopped by the launcher), 128+N when the launcher
  was stopped by signal N, else 0;
* a failed run starts again with a fresh rendezvous up to ``max_restarts`` times
  (--max-restarts), unless a signal or a start-up problem ended it.

The mode's side of a run (``job``; modes/gloo_run.py's GlooJob, modes/mpi_run.py's
MpiJob) says how: ``prepare(restart)`` (a RunOutcome when the run cannot begin),
``starts(restart)`` (the Start actions, lazily), ``cannot_start(start, error)`` (the line
and exit code), ``fault_records()``, ``ended(outcome)`` and ``close()`` after a run,
``size``, ``start_timeout`` (seconds or None) and ``launcher`` (None, or the name of the
one process that starts every rank: "mpiexec").

The ranks it started are its Membership's (runner/elastic/membership.py), told at each
start and read as a tuple (``ranks``): in a job of fixed size nobody is retired or
lost, so the elastic policy (elastic_policy.py) is the only one to tell it more.

    policy = StaticPolicy(GlooJob(plan, signals), max_restarts=2)
    outcome = agent.run(plan, RankGroup(signals), policy)
"""

import itertools
import time

from ...job import rank_env, silent_ranks
from ...job.rank_names import rank_brackets
from ..processes import failures
from ..processes.events import RankExited, Signalled, Tick
from ..processes.output import log_line
from ..processes.signals import signal_name
from ..elastic.membership import Membership
from .agent import RESTART, Abort, Forward, Kill, Stop
from .outcome import RunOutcome


# How often the fault records are read for silent ranks while the job runs.
SILENCE_POLL_S = 0.25
NEVER_S = 1e9  # a Stop's SIGTERM that never comes (the SIGKILL comes first)


class StaticPolicy(object):
    def __init__(self, job, max_restarts=0, grace=3.0, settle=0.5, log=None):
        self.job, self.limit = job, max_restarts
        self.grace, self.settle = grace, settle
        self.log = log or log_line
        self.restart = 0
        self._new_run()

    def _new_run(self):
        self.members = Membership()  # who this run's Start actions started
        self.exited = set()      # the ranks whose exit was reported
        self.failed = None       # the rank that failed first
        self.signalled = None    # the signal that stopped the launcher
        self.killed = False
        self.stop_at = None      # when the ranks left are stopped after a failure
        self.terminated = 0      # ranks mpiexec stopped without an exit status
        self.report = None       # the line naming the failure, once logged
        self.silent_ids = {}     # this launcher's rank -> the record that declared it silent
        self.silence_seen = set()  # (culprit, message) of the silent records acted on
        self.silence_read = 0.0  # when the fault records were last read for them

    # -- starting ------------------------------------------------------------------
    def begin(self, plan):
        self._new_run()
        ended = self.job.prepare(self.restart)
        if ended is not None:
            return ended
        self._prepared()
        timeout = self.job.start_timeout
        deadline = float("inf") if timeout is None else time.monotonic() + timeout
        starts = self.job.starts(self.restart)
        for i in itertools.count():
            if time.monotonic() > deadline:
                why = ("could not start rank(s) %s within the start-up timeout of %s s "
                       "(--start-timeout / HOROVOD_START_TIMEOUT)"
                       % (rank_brackets(range(i, self.job.size)),
                          rank_env.number_text(timeout)))
                self.log(why)
                yield Abort()
                # Not restartable: a restart meets the same slow start.
                return RunOutcome(1, restartable=False, why=why)
            start = next(starts, None)
            if start is None:
                return None
            try:
                rank = yield start
            except OSError as e:
                line, code = self.job.cannot_start(start, e)
                self.log(line)
                yield Abort()
                return RunOutcome(code)
            if rank is None:
                return None  # stopped while starting: the signal is answered next
            self.members.started(rank)

    def _prepared(self):
        """The run's rendezvous is up, no rank started yet."""

    # -- answering events -------------------------------------------------------------
    def answer(self, event):
        if isinstance(event, Signalled):
            yield from self._signalled(event.signum)
        elif isinstance(event, RankExited):
            yield from self._exited(event.rank)
        elif isinstance(event, Tick):
            yield from self._tick()

    @property
    def ranks(self):
        """Every Rank this run started (the membership's, read-only)."""
        return self.members.ranks

    def running(self):
        return self.members.running()

    def _signalled(self, signum):
        if self.signalled is None and not self.killed:
            self.signalled = signum
            self.stop_at = None  # the launcher's own stop is under way
            self.log("received %s, forwarding it to %s"
                     % (signal_name(signum), self.job.launcher or "all ranks"))
            yield Forward(signum)
        else:
            self.killed = True
            yield Kill()

    def _exited(self, rank):
        self.exited.add(rank.rank)
        if rank.returncode == 0 or self.failed is not None or self.signalled is not None \
                or self._ignored(rank):
            return
        if (yield from self._goes_on(rank)):
            return
        self.failed = rank
        # The others are stopped a moment later: a rank failing by itself at the same
        # time (one on another host, whose exit status comes over ssh) ends with its own
        # status, and the survivors' fault records have time to reach the store.
        self.stop_at = time.monotonic() + min(self.settle, self.grace)

    def _ignored(self, rank):
        """A rank whose failure is no failure of the job (elastic: one it stopped)."""
        return False

    def _goes_on(self, rank):
        """Whether the job goes on without the failed ``rank`` (elastic jobs)."""
        return False
        yield

    def _kill_silent(self):
        """SIGKILL (now, no SIGTERM first) the ranks the others' cores declared silent:
        the signal that ends a stopped process, and for a rank on another host its ssh
        session, abandoning the host if it cannot be reached (its rank ends there by its
        own bound). Under mpiexec, which cannot stop one rank, the survivors' failure
        stops the job (``_tick``)."""
        now = time.monotonic()
        if now < self.silence_read + SILENCE_POLL_S or self.signalled is not None:
            return
        self.silence_read = now
        fresh = {c: rec for c, rec in silent_ranks.silent(self.job.fault_records()).items()
                 if (c, rec.message) not in self.silence_seen}
        if not fresh:
            return
        self.silence_seen |= {(c, rec.message) for c, rec in fresh.items()}
        ids = self._launcher_ranks(fresh)
        for c, rec in fresh.items():
            if c in ids:
                self.silent_ids.setdefault(ids[c], rec)
        victims = [p for p in self.running() if p.rank in set(ids.values())]
        if victims and self.job.launcher is None:
            yield Stop(victims, term_in=NEVER_S, kill_in=0.0)

    def _launcher_ranks(self, core_ranks):
        """core rank -> this launcher's rank of the same process (the same numbers in a
        job of fixed size; an elastic job renumbers its ranks when it re-forms)."""
        return {c: c for c in core_ranks}

    def _describe_lost(self, rank):
        """How ``rank`` (a Rank that ended) failed, for a line of the launcher."""
        if rank.rank in self.silent_ids:
            return silent_ranks.describe(rank.rank, rank.returncode,
                                         self.silent_ids[rank.rank])
        return failures.describe(rank.outcome())

    def _tick(self):
        yield from self._kill_silent()
        now = time.monotonic()
        if self.stop_at is None or now < self.stop_at:
            return
        records = self.job.fault_records()
        # a silent rank does not end by itself: not waited for
        named = failures.culprits_named(records) - set(silent_ranks.silent(records))
        if self.job.launcher is None:
            # A rank the others blame is ending by itself: let it.
            later = [p for p in self.running() if p.rank in named]
            kill_in = self.grace * (2 if later else 1)
            self.stop_at = None
            yield Stop([p for p in self.running() if p not in later], kill_in=kill_in)
            yield Stop(later, term_in=self.grace, kill_in=kill_in)
        elif not named - self.exited or now >= self.stop_at + self.grace:
            self.stop_at = None  # mpiexec stops every rank: after those blamed ended
            self.terminated = self.job.size - len(self.exited)
            yield Stop(self.running())

    # -- the end -------------------------------------------------------------------------
    def end(self, outcomes, ended=None):
        """The run's RunOutcome (its failure named), or RESTART."""
        if ended is None:
            ended = self._outcome(outcomes)
            self.job.ended(ended)
        self.job.close()
        if not ended.failed or not ended.restartable or self.limit == 0:
            return ended
        if self.restart == self.limit:
            self.log("giving up: the job failed %d time(s), more than --max-restarts %d "
                     "allows (last failure: %s)" % (self.restart + 1, self.limit, ended.why))
            return ended
        self.restart += 1
        self.log("restarting every rank with a fresh rendezvous (restart %d of %d) because "
                 "%s" % (self.restart, self.limit, ended.why))
        return RESTART

    def _outcome(self, outcomes):
        if self.failed is not None:
            code = self._report_failure(outcomes)
        elif self.signalled is not None:
            code = 128 + int(self.signalled)
        elif self.job.launcher and self.ranks and self.ranks[0].returncode:
            code = self.ranks[0].returncode  # mpiexec failed, no rank did
            self.log("%s %s" % (self.job.launcher, failures.describe_status(code)))
            code = failures.exit_code_for(code)
        else:
            code = 0
        return RunOutcome(code, self.failed is not None and self.signalled is None,
                          self.report)

    def _report_failure(self, outcomes):
        """Name the rank whose failure came first and those that stopped in consequence
        (failures.py); return the exit code."""
        records = self.job.fault_records()
        found = failures.blame(outcomes, records)
        if found is None:  # no rank's exit was recorded: name the one reported
            self.report = "rank %d %s" % (self.failed.rank,
                                          failures.describe_status(self.failed.returncode))
            self.log(self.report)
            return failures.exit_code_for(self.failed.returncode)
        root, consequences, first_exit = found
        self.report = failures.describe_blame(root, consequences, first_exit, records)
        if not consequences and self.terminated > 0:
            self.report += "; the other %d running rank(s) were terminated" % self.terminated
        self.log(self.report)
        return failures.exit_code_of(root, self.failed.returncode, first_exit, records)

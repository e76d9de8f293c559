"""What an elastic job (--min-np, --host-discovery-script) does when a rank fails.

A failed rank does not end the job while at least --min-np ranks are left: the others
re-form without it (tf_hvd.elastic), its host is blacklisted and its other ranks stopped
(elastic/elastic_hosts.py). Fewer than --min-np left: the job waits up to
--elastic-timeout for new ranks, then stops. It stops at once when every rank failed,
when it was reset more often than --reset-limit allows, or when no rank left holds its
committed state (then the final line says which commit was lost). Signals and the
report of a failure that ends the job are the static policy's (static_policy.py).

Who is in the job is the Membership's (elastic/membership.py): this policy tells it
that a rank is lost and asks it who is left and whether the committed state is; it
writes none of its lists. It only answers with actions: the agent starts and stops the
processes.

    policy = ElasticPolicy(GlooJob(plan))
    outcome = agent.run(plan, RankGroup(signals), policy)
"""

import time

from ...job import elastic_state
from ..elastic.blacklist import Blacklist
from ..elastic.elastic_hosts import ElasticHosts
from ..elastic.membership import Membership
from ..processes import failures
from .agent import Stop
from .outcome import RunOutcome
from .static_policy import StaticPolicy


class ElasticPolicy(StaticPolicy):
    def __init__(self, job, grace=3.0, settle=0.5, log=None):
        """``job``: the mode's side of the run (static_policy.py), with its ``config``
        (whose ``elastic`` settings this policy follows), ``can_join(host)`` and
        ``new_rank(id, host)`` (elastic/elastic_hosts.py)."""
        super(ElasticPolicy, self).__init__(job, 0, grace, settle, log)
        elastic = job.config.elastic
        self.min_np, self.timeout = elastic.min_np, elastic.timeout
        self.reset_limit = elastic.reset_limit  # None: no limit
        self.hosts = None
        self.short_since = None   # since when fewer than --min-np ranks are left
        self.lost_report = None   # the job fails: its committed state was lost
        self.none_left = False    # the job ends: every rank failed

    def _prepared(self):
        ids = range(self.job.size)
        self.members = Membership(
            ids, elastic_state.StateHolders(self.job.server.store, ids),
            Blacklist(self.job.config.elastic.cooldown_range))
        self.hosts = ElasticHosts(self.job, self.members)

    def _launcher_ranks(self, core_ranks):
        """After a re-form a core's rank is its process's place among the round's members
        (tf_hvd/elastic.py); before the first, the rank it was started as."""
        store = self.job.server.store
        current = store.get(elastic_state.ROUND_KEY)
        if not current:
            return {c: c for c in core_ranks}
        members = elastic_state.parse_ids(
            store.get(elastic_state.round_key(int(current), "members")))
        return {c: members[c] for c in core_ranks if 0 <= c < len(members)}

    def _ignored(self, rank):
        return self.members.is_retired(rank) or self.lost_report is not None

    def _stop_job(self, report):
        """End the job as failed (its committed state is lost); ``report`` is the final
        line."""
        if self.lost_report is None:
            self.lost_report = report
            yield Stop(self.running())

    def _goes_on(self, rank):
        """The job lost ``rank``: log it; False when the job must end now."""
        self.members.lose(rank)
        what = self._describe_lost(rank)
        lines = yield from self.hosts.rank_lost(rank)  # blacklists its host
        try:
            return (yield from self._decide(what))
        finally:
            for line in lines:
                self.log(line)

    def _decide(self, what):
        running = self.members.taking_part()
        if not running:  # Horovod: every rank failed, the job ends (no waiting)
            self.log("%s; no rank is left: stopping the job (every rank failed or was "
                     "stopped)" % what)
            self.none_left = True
            return False
        lost = self.members.state_lost()
        if lost is not None:
            self.log("%s; no rank left holds the job's committed state: stopping the job"
                     % what)
            yield from self._stop_job(lost)
            return True
        resets = len(self.members.lost)  # each lost rank is a reset
        if self.reset_limit is not None and resets > self.reset_limit:
            self.log("%s; stopping the job: it has been reset %d time(s), more than "
                     "--reset-limit %d allows" % (what, resets, self.reset_limit))
            return False
        if len(running) < self.min_np:
            if self.short_since is None:
                self.short_since = time.monotonic()
            self.log("%s; %d rank(s) left, fewer than --min-np %d: waiting up to %g s "
                     "(--elastic-timeout)" % (what, len(running), self.min_np, self.timeout))
            return True
        self.log("%s; the job goes on with the %d rank(s) left (elastic reset %d)"
                 % (what, len(running), resets))
        return True

    def _tick(self):
        if self.failed is None and self.signalled is None and self.lost_report is None:
            lost = yield from self.hosts.tick()  # host discovery, the committed state
            if lost is not None:
                yield from self._stop_job(lost)
        yield from super(ElasticPolicy, self)._tick()
        if self.short_since is not None and len(self.members.taking_part()) >= self.min_np:
            self.short_since = None  # enough ranks again (new ones joined)
        running = self.running()
        if (self.short_since is not None and self.failed is None and running and
                time.monotonic() - self.short_since >= self.timeout):
            self.log("stopping the job: only %d rank(s) left for %g s (--elastic-timeout), "
                     "fewer than --min-np %d" % (len(running), self.timeout, self.min_np))
            self.failed = self.members.lost[0]
            yield Stop(running)

    def _outcome(self, outcomes):
        if self.lost_report is not None and self.signalled is None:
            self.report = self.lost_report
            self.log(self.report)
            holders = [p for p in self.members.lost if p.returncode]
            return RunOutcome(failures.exit_code_for(holders[0].returncode) if holders
                              else 1, False, self.report)
        lost = self.members.lost
        if (self.failed is None and lost and self.signalled is None and
                not self.members.finishing()):
            self.failed = lost[0]  # every rank failed in the end
        if self.failed is None or not self.none_left:
            return super(ElasticPolicy, self)._outcome(outcomes)
        # every failure was its own: name them all
        failed = [p for p in self.ranks if p.returncode and not self.members.is_retired(p)]
        self.report = "the job failed: every rank failed or was stopped: %s" % "; ".join(
            failures.describe(p.outcome()) for p in failed)
        self.log(self.report)
        return RunOutcome(failures.exit_code_for(lost[0].returncode), True, self.report)

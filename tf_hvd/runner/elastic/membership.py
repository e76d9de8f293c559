"""Who is in a job: the one object that owns it, asked and told by the policies.

It holds every rank the launcher started (in order), the ranks it retired (stopped on
purpose: their exit is no failure), the ranks lost (failed; the job went on without
them), the ids handed out, the blacklisted hosts, and, in an elastic job, which ranks
hold the committed state (the job contract's StateHolders, tf_hvd/job/elastic_state.py)
with the pending holders: the last ones, kept past their stop until the state has
moved. The policies (runner/agent/) and ElasticHosts tell it what happened and ask it
what follows; it touches no process and logs nothing: its answers are values (the
ranks to stop, the final line of a job whose state is lost). Its lists are read as
tuples and frozensets, so no other object writes them.

    >>> class Rank(object):
    ...     def __init__(self, rank, host):
    ...         self.rank, self.host, self.returncode = rank, host, None
    >>> members = Membership(range(2))
    >>> a, b = Rank(0, "h1"), Rank(1, "h2")
    >>> members.started(a); members.started(b)
    >>> a.returncode = 1
    >>> members.lose(a)
    >>> [p.rank for p in members.taking_part()], [p.rank for p in members.lost]
    ([1], [0])
    >>> members.retire([b]) == [b], members.retire([b]), members.next_id()
    (True, [], 2)
"""

from ...job.elastic_state import id_list
from ..processes import failures
from .blacklist import Blacklist


def _by_rank(procs):
    return sorted(procs, key=lambda p: p.rank)


class Membership(object):
    def __init__(self, ids=(), holders=None, blacklist=None):
        """``ids``: the ids of the job's first ranks; ``holders``: the job's StateHolders
        (None: no committed state is followed, as in a job of fixed size);
        ``blacklist``: the Blacklist of an elastic job's hosts."""
        self._ranks = []          # every Rank started, in start order
        self._retired = set()     # the ranks stopped on purpose
        self._lost = []           # the failed ranks the job went on without
        self._ids = list(ids)     # every id handed out; a newcomer gets the next one
        self._holders = holders
        self._blacklist = blacklist or Blacklist()
        self._lost_holders = []   # holders lost since the state last reached new ranks
        self._pending = {}        # last holder -> (since, why it is to stop)

    # -- what it holds, read-only ------------------------------------------------------
    @property
    def ranks(self):
        return tuple(self._ranks)

    @property
    def retired(self):
        return frozenset(self._retired)

    @property
    def lost(self):
        return tuple(self._lost)

    @property
    def ids(self):
        return tuple(self._ids)

    @property
    def pending(self):
        """The pending holders, by rank."""
        return tuple(_by_rank(self._pending))

    @property
    def blacklist(self):
        """The hosts' Blacklist (its methods are its own ask and tell)."""
        return self._blacklist

    # -- asked ---------------------------------------------------------------------------
    def running(self):
        return [p for p in self._ranks if p.returncode is None]

    def taking_part(self):
        """The running ranks not retired."""
        return [p for p in self.running() if p not in self._retired]

    def finishing(self):
        """A rank taking part has exited 0: the job is ending, no rank joins any more."""
        return any(p.returncode == 0 and p not in self._retired for p in self._ranks)

    def is_retired(self, proc):
        return proc in self._retired

    def holds(self, proc):
        """Whether ``proc`` holds the committed state."""
        return self._holders is not None and self._holders.holds(proc.rank)

    def without_state(self):
        """The ids of the ranks taking part that have not received the state yet."""
        return [p.rank for p in self.taking_part() if not self.holds(p)]

    def next_id(self):
        return max(self._ids) + 1

    def commit(self):
        """The job's last commit count (0: none yet)."""
        return self._holders.commit() if self._holders is not None else 0

    def clock(self):
        return self._holders.clock()

    # -- told ----------------------------------------------------------------------------
    def started(self, rank):
        """The launcher started ``rank`` (a Rank: ``rank``, ``host``, ``returncode``)."""
        self._ranks.append(rank)

    def added(self, rank, new_id):
        """A newcomer, ``rank``, started with the id ``new_id`` (next_id())."""
        self._ranks.append(rank)
        self._ids.append(new_id)

    def wait_for(self, ids):
        """Newcomers ``ids`` were started: the running ranks wait for them at their next
        commit to hand them the state."""
        self._holders.started(ids)

    def retire(self, procs):
        """``procs`` are to be stopped on purpose; returns those newly retired (running,
        not retired before): the ranks to stop."""
        procs = [p for p in procs if p.returncode is None and p not in self._retired]
        self._retired.update(procs)
        return procs

    def lose(self, proc):
        """``proc`` failed and the job goes on without it."""
        self._lost.append(proc)
        if self.holds(proc):
            self._lost_holders.append(proc)
        self._forget([proc])

    def _forget(self, procs):
        if self._holders is not None:
            for p in procs:
                self._holders.forget(p.rank)

    # -- the committed state -------------------------------------------------------------
    def keep_last_holders(self, procs, why):
        """Of ``procs``, about to be stopped (``why``), the ones to keep: the last ranks
        holding the state, pending until it has moved. Returns them."""
        leaving = set(procs) | set(self._pending)
        others = [p for p in self.taking_part() if p not in leaving and self.holds(p)]
        keep = [] if others else [p for p in procs if self.holds(p)]
        if keep:
            now = self.clock()
            for p in keep:
                self._pending[p] = (now, why)
        return keep

    def let_go(self, procs):
        """``procs`` stop taking part: (those that held the state, those that had not
        received it)."""
        held = [p for p in procs if self.holds(p)]
        self._forget(procs)
        return held, [p for p in procs if p not in held]

    def ask_to_leave(self, procs):
        """Tell the running ranks that ``procs`` leave at the job's next commit."""
        self._holders.leaving([p.rank for p in procs])

    def pending_holders(self):
        """(the pending holders still running by rank, since when the first was kept,
        the reasons), or None when there are none."""
        for p in list(self._pending):
            if p.returncode is not None or p in self._retired:
                del self._pending[p]
        if not self._pending:
            return None
        return (self.pending, min(t for t, _ in self._pending.values()),
                sorted(set(w for _, w in self._pending.values())))

    def other_holders(self):
        """The ranks taking part, pending holders aside, that hold the state."""
        return [p for p in self.taking_part() if p not in self._pending and self.holds(p)]

    def release_pending(self, state_lost=False):
        """The pending holders go (the state has moved, or ``state_lost``: it could not);
        returns them."""
        procs = self.pending
        if state_lost:
            self._lost_holders.extend(procs)
        self._pending = {}
        self._forget(procs)
        return procs

    def late(self, timeout):
        """The newcomers still running that have not come to the rendezvous ``timeout``
        s after their start (forgotten as holders-to-be)."""
        found = []
        for i in self._holders.late(timeout):
            procs = [p for p in self.taking_part() if p.rank == i]
            self._holders.forget(i)
            found.extend(procs[:1])
        return found

    def refresh(self):
        """Forget newcomers gone before receiving the state; the ones that received it
        hold it (and the lost holders no longer matter)."""
        taking = set(p.rank for p in self.taking_part())
        for i in list(self._holders.newcomers):
            if i not in taking:
                self._holders.forget(i)
        if self._holders.refresh():
            self._lost_holders = []

    def state_lost(self):
        """The final line when no rank taking part holds the committed state any more
        (the job must fail rather than start over); else None."""
        if self._holders is None or self.finishing():
            return None
        taking = self.taking_part()
        if any(self.holds(p) for p in taking):
            return None
        gone = _by_rank(set(self._lost_holders + [
            p for p in self._ranks if p not in taking and self.holds(p)]))
        newcomers = [p.rank for p in taking]
        return ("the job failed: its committed state was lost at commit %d: the rank(s) "
                "that held it are gone (%s)%s; tf_hvd does not start a job over from "
                "nothing: restart it from a checkpoint of your own"
                % (self.commit(),
                   "; ".join(self._gone(p) for p in gone) or "none is left",
                   (", and rank(s) %s, which joined later, had not received it"
                    % id_list(newcomers)) if newcomers else ""))

    def _gone(self, p):
        if p.returncode is not None and p not in self._retired:
            return failures.describe(p.outcome())
        return "rank %d (on %s), stopped by the launcher" % (p.rank, p.host)

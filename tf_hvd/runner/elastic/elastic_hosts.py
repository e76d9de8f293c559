"""Elastic runs in Gloo mode: which processes take part, and where new ones start.

The launcher publishes the ids of the processes that take part under
``tf_hvd/elastic/ids`` in its rendezvous store (tf_hvd.elastic re-forms the job among
them). With a --host-discovery-script it also follows the hosts the script lists, as
Horovod's elastic driver does:

* a host it adds gets ranks on its free slots (up to --max-np); the running ranks re-form
  with them at their next commit, waiting for them (the newcomers receive the committed
  state there); a newcomer that has not come --elastic-timeout seconds after its start is
  stopped, named, and its host blacklisted. Ranks on this machine start directly, the
  others over ssh (the job's secret on ssh's stdin), or inside a Slurm allocation with
  srun (the rank's environment carried by Slurm), as the job's first ranks;
* a host it no longer lists has its ranks stopped; the others re-form without them;
* a host where a rank failed is blacklisted (no new rank for the rest of the job, or
  until its --blacklist-cooldown-range cooldown ends) and its other ranks are stopped.

The committed state is never dropped on purpose (tf_hvd/job/elastic_state.py): ranks that hold it
and would be stopped while no other rank holds it stay (at most --elastic-timeout) until
a newcomer has received it; when the holders are gone all the same (killed, host lost),
the job fails, saying that the state was lost and at which commit, rather than start
over from nothing.

Hosts are keyed by the name the script prints: ``localhost`` and ``127.0.0.1`` are two
hosts, as in Horovod.

Who is in the job (the ranks, the retired ones, the blacklist, the holders of the
committed state) is the Membership's (membership.py): this class tells it what it did
and asks it what follows, and writes no list of its own about the ranks. Its methods
that act are generators of the agent's actions (runner/agent/agent.py: Start, Stop).

    hosts = ElasticHosts(job, members)
    lines = yield from hosts.rank_lost(rank)    # inside the policy's answer
    lost = yield from hosts.tick()
"""

from ..agent.agent import Stop
from ..processes.output import log_line
from ...job.elastic_state import IDS_KEY, id_list
from .discovery import HostDiscovery

# A host listed again this soon after its ranks were stopped because it was not listed
# gets new ranks only once it has been listed this long in a row (a flapping host would
# otherwise make the running ranks wait for newcomers at every commit).
FLAP_SECONDS = 10.0


def _ranks(procs):
    return ", ".join(str(p.rank) for p in procs)


class ElasticHosts(object):
    def __init__(self, job, members):
        """``job``: the mode's side of the run (its ``server``, ``config``,
        ``can_join(host)`` and ``new_rank(id, host)``, the Start of a rank it adds);
        ``members``: the job's Membership."""
        self.job, self.server, self.members = job, job.server, members
        self.elastic = job.config.elastic  # launch_config.ElasticSettings
        self.discovery = None
        if self.elastic.discovery_script:
            self.discovery = HostDiscovery(self.elastic.discovery_script,
                                           self.elastic.slots_per_host, log=log_line)
        self.warned = set()
        self._published = None
        self.publish(",".join(str(i) for i in members.ids))
        self._dropped = {}       # host -> when its ranks were stopped (no longer listed)
        self._listed_since = {}  # host -> since when it is listed without a break

    def publish(self, ids):
        if ids != self._published:
            self.server.store.put(IDS_KEY, ids.encode())
            self._published = ids

    def _publish_running(self):
        self.publish(",".join(str(p.rank) for p in self.members.taking_part()))

    def _retire(self, procs, after=None):
        """Stop ``procs`` (their exit is no failure): SIGTERM now, or ``after`` s from now
        when they were asked to leave by themselves; SIGKILL the group's grace later."""
        procs = self.members.retire(procs)
        if procs:
            yield Stop(procs, term_in=after or 0.0)

    # -- a rank failed ----------------------------------------------------------
    def rank_lost(self, proc):
        """Blacklist the failed rank's host and stop its other ranks (discovery only);
        return the lines to log (the policy logs them after its own). The policy has
        told the membership that ``proc`` is lost."""
        lines = []
        if self.discovery is not None:
            host = proc.host
            blacklist = self.members.blacklist
            already = blacklist.is_blacklisted(host)
            delay = blacklist.add(host)
            others = [p for p in self.members.taking_part() if p.host == host
                      and p is not proc and p not in self.members.pending]
            keep, _ = yield from self._stop(others, "%s (blacklisted)" % host)
            if not already:
                lines.append(self._blacklisting(host, proc, delay,
                                                [p for p in others if p not in keep], keep))
        self._publish_running()
        return lines

    # -- the committed state ------------------------------------------------------
    def _leave(self, procs):
        """Ask ``procs`` to leave at the job's next commit: they are no longer listed,
        the running ranks re-form without them there (with that commit) and they exit;
        SIGTERM if they are still running --elastic-timeout later."""
        if not procs:
            return
        yield from self._retire(procs, after=self.elastic.timeout)
        self._publish_running()
        self.members.ask_to_leave(procs)

    def _stop(self, procs, why, graceful=False):
        """Stop ``procs`` (``graceful``: at the next commit), except those that are the
        last ranks holding the committed state: they stay until it has moved (at most
        --elastic-timeout). Returns (those kept, those stopped that had not received the
        state)."""
        keep = self.members.keep_last_holders(procs, why)
        go = [p for p in procs if p not in keep]
        held, fresh = self.members.let_go(go)
        if graceful:  # holders leave at a commit; newcomers have nothing to hand on
            yield from self._leave(held)
            yield from self._retire(fresh)
        else:
            yield from self._retire(go)
        return keep, fresh

    def _waiting_for(self):
        """Why the kept holders stay: a phrase naming the ranks that should receive it."""
        newcomers = self.members.without_state()
        commit = self.members.commit()
        if newcomers:
            return ("hold the job's committed state (commit %d), which rank(s) %s have not "
                    "received yet: they stay until it has (at most %g s, --elastic-timeout)"
                    % (commit, id_list(newcomers), self.elastic.timeout))
        return ("hold the job's committed state (commit %d) and no other rank has it: they "
                "stay until a new rank has received it (at most %g s, --elastic-timeout)"
                % (commit, self.elastic.timeout))

    def _follow_pending(self):
        """Stop the pending holders once another rank holds the state, or after
        --elastic-timeout."""
        pending = self.members.pending_holders()
        if pending is None:
            return
        procs, since, whys = pending
        holders = self.members.other_holders()
        if holders:
            log_line("the committed state has reached rank(s) %s: rank(s) %s on %s, leave at "
                     "the next commit (the others re-form without them)"
                     % (_ranks(holders), _ranks(procs), ", ".join(whys)))
            yield from self._leave(self.members.release_pending())
        elif self.members.clock() - since >= self.elastic.timeout:
            log_line("no other rank has received the committed state within %g s "
                     "(--elastic-timeout): stopping rank(s) %s on %s all the same"
                     % (self.elastic.timeout, _ranks(procs), ", ".join(whys)))
            yield from self._retire(self.members.release_pending(state_lost=True))

    def _drop_late(self):
        """Newcomers that have not come within --elastic-timeout of their start."""
        timeout = self.elastic.timeout
        for p in self.members.late(timeout):
            delay = self.members.blacklist.add(p.host)
            log_line("rank %d (on %s) has not come to the rendezvous within %g s "
                     "(--elastic-timeout) of its start: stopping it, the others go on "
                     "without it; %s is blacklisted%s" % (
                         p.rank, p.host, timeout, p.host,
                         "" if delay is None else " for %.1f s" % delay))
            yield from self._retire([p])

    def _blacklisting(self, host, proc, delay, others, keep=()):
        stopping = ("; stopping its other rank(s) %s" % _ranks(others)) if others else ""
        if keep:
            stopping += "; its other rank(s) %s %s" % (_ranks(keep),
                                                        self._waiting_for())
        blacklist = self.members.blacklist
        cooldown = blacklist.cooldown_range
        if delay is None:
            return ("blacklisting %s after rank %d's failure: no rank starts on it for the "
                    "rest of the job (--blacklist-cooldown-range MIN MAX lets it come "
                    "back)%s" % (host, proc.rank, stopping))
        return ("blacklisting %s after rank %d's failure (failure %d of this host): no "
                "rank starts on it for %.1f s (--blacklist-cooldown-range %d %d)%s"
                % (host, proc.rank, blacklist.count(host), delay, cooldown[0],
                   cooldown[1], stopping))

    # -- following the discovery script -------------------------------------------
    def _flapping(self, host):
        """True (said once per return) while ``host``, dropped a moment ago, has not yet
        been listed for FLAP_SECONDS in a row."""
        dropped = self._dropped.get(host)
        if dropped is None:
            return False
        now = self.members.clock()
        since = self._listed_since.get(host, now)
        if now - since >= FLAP_SECONDS:
            del self._dropped[host]
            return False
        if since >= dropped and ("flap", host, dropped) not in self.warned:
            self.warned.add(("flap", host, dropped))
            log_line("host discovery: %s is listed again %.1f s after it was dropped; it gets "
                     "ranks once it has been listed for %g s in a row (ignored until then)"
                     % (host, since - dropped, FLAP_SECONDS))
        return True

    def _offered(self, hosts):
        """[(host, slots)] in discovery order: blacklisted hosts, hosts that flap and (on
        a loopback-only job) other machines left out."""
        offered = []
        for host, slots in hosts:
            if self.members.blacklist.is_blacklisted(host) or self._flapping(host):
                continue
            if not self.job.can_join(host):
                if host not in self.warned:
                    self.warned.add(host)
                    log_line("host discovery: %s is not this machine, but this job's ranks "
                             "listen on loopback only (this machine has no other address); "
                             "start the job with --network-interfaces so ranks on other "
                             "hosts can join" % host)
                continue
            offered.append((host, slots))
        return offered

    def _start(self, new_id, host):
        """Start rank ``new_id`` on ``host``: False when the launcher is being stopped;
        OSError if it cannot be started."""
        rank = yield self.job.new_rank(new_id, host)
        if rank is not None:
            self.members.added(rank, new_id)
        return rank is not None

    def _stop_unlisted(self, hosts):
        listed = set(h for h, _ in hosts)
        gone = {}
        for p in self.members.taking_part():
            if p.host not in listed and p not in self.members.pending:
                gone.setdefault(p.host, []).append(p)
        for host, procs in gone.items():
            self._dropped[host] = self.members.clock()
            keep, fresh = yield from self._stop(
                procs, "%s, which is no longer listed" % host, graceful=True)
            go = [p for p in procs if p not in keep]
            if not keep:
                if fresh == go:
                    log_line("host discovery: %s is no longer listed; stopping rank(s) %s on "
                             "it, which had not received the committed state yet"
                             % (host, _ranks(procs)))
                    continue
                log_line("host discovery: %s is no longer listed; rank(s) %s on it leave at "
                         "the next commit (the others re-form without them)"
                         % (host, _ranks(procs)))
                continue
            log_line("host discovery: %s is no longer listed, but its rank(s) %s %s%s"
                     % (host, _ranks(keep), self._waiting_for(),
                        ("; rank(s) %s on it leave at the next commit" % _ranks(go))
                        if go else ""))

    def tick(self):
        """Called every poll while the job runs; the final line when the job's committed
        state is lost (the policy stops the job), else None."""
        self._publish_running()
        if self.discovery is None or self.members.finishing():
            return  # no script, or the job is finishing: no rank joins any more
        self.members.refresh()
        yield from self._drop_late()
        yield from self._follow_pending()
        self._publish_running()
        lost = self.members.state_lost()
        if lost is not None:
            return lost
        for host in self.members.blacklist.returned():
            log_line("%s's blacklist cooldown is over: ranks may start on it again" % host)
        hosts = self.discovery.poll()
        if hosts is None:
            return
        now = self.members.clock()
        listed = set(h for h, _ in hosts)
        self._listed_since = dict((h, self._listed_since.get(h, now)) for h in listed)
        # Ranks on hosts no longer listed (or kept there as the last holders) leave room:
        # newcomers start first, so that the state has somewhere to go.
        running = [p for p in self.members.taking_part()
                   if p.host in listed and p not in self.members.pending]
        per_host = {}
        for p in running:
            per_host[p.host] = per_host.get(p.host, 0) + 1
        max_np = self.elastic.max_np
        room = float("inf") if max_np is None else max_np - len(running)
        all_started = []
        for host, slots in self._offered(hosts):
            started = []
            while room > 0 and per_host.get(host, 0) < slots:
                new_id = self.members.next_id()
                try:
                    if not (yield from self._start(new_id, host)):
                        break
                except OSError as e:
                    log_line("host discovery: cannot start a rank on %s: %s"
                             % (host, e.strerror or e))
                    break
                started.append(new_id)
                per_host[host] = per_host.get(host, 0) + 1
                room -= 1
            if started:
                log_line("host discovery: %d slot(s) on %s; started rank(s) %s, which "
                         "the running ranks wait for at their next commit (at most %g s, "
                         "--elastic-timeout) to hand them the committed state"
                         % (slots, host, ", ".join(str(i) for i in started),
                            self.elastic.timeout))
                all_started.extend(started)
        self._publish_running()
        if all_started:  # listed first: the running ranks' reset waits for them
            self.members.wait_for(all_started)
        yield from self._stop_unlisted(hosts)

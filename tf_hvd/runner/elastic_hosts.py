"""Elastic runs in Gloo mode: which processes take part, and where new ones start.

The launcher publishes the ids of the processes that take part under
``tf_hvd/elastic/ids`` in its rendezvous store (tf_hvd.elastic re-forms the job among
them). With a --host-discovery-script it also follows the hosts the script lists, as
Horovod's elastic driver does:

* a host it adds gets ranks on its free slots (up to --max-np); they join at the running
  ranks' next commit. Ranks on this machine start directly, the others over ssh (the
  job's secret on ssh's stdin);
* a host it no longer lists has its ranks stopped; the others re-form without them;
* a host where a rank failed is blacklisted (no new rank for the rest of the job, or
  until its --blacklist-cooldown-range cooldown ends) and its other ranks are stopped.

Hosts are keyed by the name the script prints: ``localhost`` and ``127.0.0.1`` are two
hosts, as in Horovod.

    hosts = ElasticHosts(plan, server, args)
    supervisor = Supervisor(..., tick=lambda: hosts.tick(supervisor),
                            on_rank_lost=lambda p: hosts.rank_lost(p, supervisor))
"""

import argparse
import os

from . import auth
from . import env as rank_env
from .blacklist import Blacklist
from .discovery import HostDiscovery
from .supervisor import log_line

IDS_KEY = "tf_hvd/elastic/ids"
HOST_ENV = "TF_HVD_ELASTIC_HOST"  # a rank's host as the user named it (tf_hvd.elastic)
RESTART_ENV = "TF_HVD_RESTART_COUNT"


def elastic_env(timeout, min_np):
    """What every rank of an elastic job gets (HOROVOD_ELASTIC=1 as under horovodrun)."""
    return {"HOROVOD_ELASTIC": "1", "TF_HVD_ELASTIC_TIMEOUT": "%g" % timeout,
            "TF_HVD_ELASTIC_MIN_NP": str(min_np)}


def _ranks(procs):
    return ", ".join(str(p.rank) for p in procs)


def _taking_part(supervisor):
    return [p for p in supervisor.procs
            if p.returncode is None and not getattr(p, "retired", False)]


class ElasticHosts(object):
    def __init__(self, plan, server, args, blacklist=None):
        self.plan, self.server, self.args = plan, server, args
        self.discovery = None
        if args.host_discovery_script:
            self.discovery = HostDiscovery(args.host_discovery_script, args.slots_per_host,
                                           log=log_line)
        self.blacklist = blacklist or Blacklist(getattr(args, "blacklist_cooldown_range",
                                                        None))
        self.ids = [s.rank for s in plan.slots]
        self.warned = set()
        self._published = None
        self.publish(",".join(str(i) for i in self.ids))

    def publish(self, ids):
        if ids != self._published:
            self.server.store.put(IDS_KEY, ids.encode())
            self._published = ids

    def _publish_running(self, supervisor):
        self.publish(",".join(str(p.rank) for p in _taking_part(supervisor)))

    # -- a rank failed ----------------------------------------------------------
    def rank_lost(self, proc, supervisor):
        """Blacklist the failed rank's host and stop its other ranks (discovery only);
        return the lines to log (the supervisor logs them after its own)."""
        lines = []
        if self.discovery is not None:
            host = proc.host
            already = self.blacklist.is_blacklisted(host)
            delay = self.blacklist.add(host)
            others = [p for p in _taking_part(supervisor) if p.host == host and p is not proc]
            if not already:
                lines.append(self._blacklisting(host, proc, delay, others))
            if others:
                supervisor.retire(others)
        self._publish_running(supervisor)
        return lines

    def _blacklisting(self, host, proc, delay, others):
        stopping = ("; stopping its other rank(s) %s" % _ranks(others)) if others else ""
        cooldown = self.blacklist.cooldown_range
        if delay is None:
            return ("blacklisting %s after rank %d's failure: no rank starts on it for the "
                    "rest of the job (--blacklist-cooldown-range MIN MAX lets it come "
                    "back)%s" % (host, proc.rank, stopping))
        return ("blacklisting %s after rank %d's failure (failure %d of this host): no "
                "rank starts on it for %.1f s (--blacklist-cooldown-range %d %d)%s"
                % (host, proc.rank, self.blacklist.count(host), delay, cooldown[0],
                   cooldown[1], stopping))

    # -- following the discovery script -------------------------------------------
    def _offered(self, hosts):
        """[(host, slots)] in discovery order: blacklisted hosts and (on a loopback-only
        job) other machines left out."""
        offered = []
        for host, slots in hosts:
            if self.blacklist.is_blacklisted(host):
                continue
            if self.plan.loopback_only and not self.plan.is_local(host):
                if host not in self.warned:
                    self.warned.add(host)
                    log_line("host discovery: %s is not this machine, but this job's ranks "
                             "listen on loopback only (this machine has no other address); "
                             "start the job with --network-interfaces so ranks on other "
                             "hosts can join" % host)
                continue
            offered.append((host, slots))
        return offered

    def _rank_env(self, new_id, host):
        """The joining rank's variables: the job's, with its own rank and host."""
        plan, addr = self.plan, self.plan.launcher_address()
        env = dict(plan.gloo_envs(addr, self.server.port)[0])
        bind = addr if plan.is_local(host) else host
        env.update(elastic_env(self.args.elastic_timeout, self.args.min_np))
        env.update({"HOROVOD_RANK": str(new_id), "TF_HVD_ELASTIC_ID": str(new_id),
                    "TF_HVD_ELASTIC_JOIN": "1", RESTART_ENV: "0",
                    "HOROVOD_HOSTNAME": bind.split("@", 1)[-1],
                    "HOROVOD_SLOT_HOSTNAME": host.split("@", 1)[-1],
                    HOST_ENV: host.split("@", 1)[-1]})
        return env

    def _start(self, supervisor, new_id, host):
        """Start rank ``new_id`` on ``host``; OSError if it cannot be started."""
        env = self._rank_env(new_id, host)
        secret = self.server.secret
        if self.plan.is_local(host):
            env[auth.SECRET_ENV] = secret
            argv, stdin_data = list(self.args.command), None
            child_env = rank_env.process_env(os.environ, env)
        else:
            slot = argparse.Namespace(hostname=host)
            argv, _ = self.plan.rank_argv(slot, env, os.getcwd(),
                                          stdin_vars=(auth.SECRET_ENV,))
            child_env = rank_env.process_env(os.environ, {})
            stdin_data = (secret + "\n").encode("ascii")
        supervisor.spawn(new_id, host, argv, child_env, os.getcwd(),
                         self.args.output_filename, stdin_data=stdin_data, redact=secret)

    def _stop_unlisted(self, supervisor, hosts):
        listed = set(h for h, _ in hosts)
        gone = {}
        for p in _taking_part(supervisor):
            if p.host not in listed:
                gone.setdefault(p.host, []).append(p)
        for host, procs in gone.items():
            log_line("host discovery: %s is no longer listed; stopping rank(s) %s on it (the "
                     "others re-form without them)" % (host, _ranks(procs)))
            supervisor.retire(procs)

    def tick(self, supervisor):
        """Called every poll while the job runs."""
        self._publish_running(supervisor)
        if self.discovery is None or any(p.returncode == 0 for p in supervisor.procs):
            return  # no script, or the job is finishing: no rank joins any more
        for host in self.blacklist.returned():
            log_line("%s's blacklist cooldown is over: ranks may start on it again" % host)
        hosts = self.discovery.poll()
        if hosts is None:
            return
        self._stop_unlisted(supervisor, hosts)
        running = _taking_part(supervisor)
        per_host = {}
        for p in running:
            per_host[p.host] = per_host.get(p.host, 0) + 1
        room = float("inf") if self.args.max_np is None else self.args.max_np - len(running)
        for host, slots in self._offered(hosts):
            started = []
            while room > 0 and per_host.get(host, 0) < slots:
                new_id = max(self.ids) + 1
                try:
                    self._start(supervisor, new_id, host)
                except OSError as e:
                    log_line("host discovery: cannot start a rank on %s: %s"
                             % (host, e.strerror or e))
                    break
                self.ids.append(new_id)
                started.append(new_id)
                per_host[host] = per_host.get(host, 0) + 1
                room -= 1
            if started:
                log_line("host discovery: %d slot(s) on %s; started rank(s) %s, which "
                         "join at the running ranks' next commit"
                         % (slots, host, ", ".join(str(i) for i in started)))
        self._publish_running(supervisor)

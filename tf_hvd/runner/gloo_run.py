"""Gloo mode: serve the rendezvous store, start every rank, supervise them.

Each job gets a fresh random secret (auth.py): the rendezvous server accepts only
requests signed with it, local ranks find it in HOROVOD_GLOO_RENDEZVOUS_SECRET and
remote ranks read it from ssh's stdin. It is never printed: the launcher's own lines
and the ranks' output have it masked.
"""

import argparse
import errno
import os
import shlex
import sys
import time

from . import auth
from . import env as rank_env
from . import failures
from . import network
from .rendezvous import RendezvousServer
from .signals import SignalCatcher
from .supervisor import Supervisor, log_line

USAGE_EXIT = 2


def _refusal_logger(secret):
    def on_refusal(client_address, code, reason, first):
        if first:
            host = client_address[0] if client_address else "?"
            log_line(auth.mask(
                "warning: the rendezvous server refused a request from %s (HTTP %d: %s); "
                "only this job's ranks may use it" % (host, code, reason), secret))
    return on_refusal


def checked_in_ranks(store, size):
    """Ranks whose Gloo context published its address (keys under gloo/global/)."""
    keys = set(store.keys())
    return [r for r in range(size)
            if "gloo/global/%d" % r in keys or "gloo/global/rank_%d" % r in keys]


def _report_missing_ranks(server, size):
    """After a failure: name the ranks that never reached hvd.init(), if others did."""
    present = checked_in_ranks(server.store, size)
    missing = [r for r in range(size) if r not in present]
    if present and missing:
        log_line("rank(s) %s never checked in at the rendezvous (they did not reach "
                 "hvd.init(), or could not connect to %s:%s)"
                 % (_rank_list(missing), server.bind_address, server.port))


FAULT_PREFIX = "tf_hvd/fault/"


def fault_records(store):
    """rank -> failures.FaultRecord: what the ranks' cores reported when they stopped."""
    records = {}
    for key in store.keys():
        if key.startswith(FAULT_PREFIX) and key[len(FAULT_PREFIX):].isdigit():
            record = failures.parse_record(store.get(key) or b"")
            if record is not None:
                records[int(key[len(FAULT_PREFIX):])] = record
    return records


def _rank_list(ranks):
    return "[" + ",".join(str(r) for r in ranks) + "]"


RESTART_ENV = "TF_HVD_RESTART_COUNT"  # how many times the job was restarted (0: first run)


def run(plan):
    """Run the job described by ``plan``, restarting it after a rank's failure up to
    ``--max-restarts`` times; return the launcher's exit code."""
    limit = getattr(plan.args, "max_restarts", 0) or 0
    restart = 0
    while True:
        code, restartable, why = _run_once(plan, restart)
        if code == 0 or not restartable or limit == 0:
            return code
        if restart == limit:
            log_line("giving up: the job failed %d time(s), more than --max-restarts %d "
                     "allows (last failure: %s)" % (restart + 1, limit, why))
            return code
        restart += 1
        log_line("restarting every rank with a fresh rendezvous (restart %d of %d) because "
                 "%s" % (restart, limit, why))


def _elastic_env(elastic):
    return {"TF_HVD_ELASTIC_TIMEOUT": "%g" % elastic.timeout,
            "TF_HVD_ELASTIC_MIN_NP": str(elastic.min_np)}


class _Joiner(object):
    """Elastic runs: starts ranks on the slots the discovery script adds, up to --max-np;
    they join the running ranks at their next commit (tf_hvd.elastic). Ranks on this
    machine start directly, ranks on other hosts over ssh like the first ones (the
    secret on ssh's stdin); that needs an address other hosts reach (plan.loopback_only
    false: a remote host in -H, or --network-interfaces)."""

    def __init__(self, plan, server, args, blacklist=None):
        from .blacklist import Blacklist
        from .discovery import HostDiscovery
        self.plan, self.server, self.args = plan, server, args
        self.discovery = HostDiscovery(args.host_discovery_script, args.slots_per_host,
                                       log=log_line)
        self.blacklist = blacklist or Blacklist(getattr(args, "blacklist_cooldown_range",
                                                        None))
        self.ids = [s.rank for s in plan.slots]
        self.warned = set()

    def _host_key(self, host):
        return "localhost" if self.plan.is_local(host) else host

    def rank_lost(self, proc):
        """A rank failed: no rank starts on its host until the cooldown (if any) ends."""
        host = self._host_key(proc.host)
        already = self.blacklist.is_blacklisted(host)
        delay = self.blacklist.add(host)
        if already:
            return
        cooldown = self.blacklist.cooldown_range
        if delay is None:
            log_line("blacklisting %s after rank %d's failure: no rank starts on it for the "
                     "rest of the job (--blacklist-cooldown-range MIN MAX lets it come back)"
                     % (host, proc.rank))
        else:
            log_line("blacklisting %s after rank %d's failure (failure %d of this host): no "
                     "rank starts on it for %.1f s (--blacklist-cooldown-range %d %d)"
                     % (host, proc.rank, self.blacklist.count(host), delay, cooldown[0],
                        cooldown[1]))

    def _offered(self, hosts):
        """[(host key, slots)] in discovery order: local entries summed under
        'localhost', blacklisted hosts and (on a loopback-only job) remote ones left out."""
        offered = {}
        for host, slots in hosts:
            key = self._host_key(host)
            if self.blacklist.is_blacklisted(key):
                continue
            if key != "localhost" and self.plan.loopback_only:
                if host not in self.warned:
                    self.warned.add(host)
                    log_line("host discovery: %s is not this machine, but this job's ranks "
                             "listen on loopback only; start the job with "
                             "--network-interfaces (or a remote host in -H) so ranks on "
                             "other hosts can join" % host)
                continue
            offered[key] = offered.get(key, 0) + slots
        return list(offered.items())

    def _rank_env(self, new_id, key):
        """The joining rank's variables: the job's, with its own rank and host."""
        plan, addr = self.plan, self.plan.launcher_address()
        env = dict(plan.gloo_envs(addr, self.server.port)[0])
        if key == "localhost":  # its topology host: the one this machine's ranks name
            slot_host = next((s.hostname for s in plan.slots if plan.is_local(s.hostname)),
                             "localhost")
            bind = addr
        else:
            slot_host = bind = key
        env.update(_elastic_env(argparse.Namespace(timeout=self.args.elastic_timeout,
                                                   min_np=self.args.min_np)))
        env.update({"HOROVOD_RANK": str(new_id), "TF_HVD_ELASTIC_ID": str(new_id),
                    "TF_HVD_ELASTIC_JOIN": "1", RESTART_ENV: "0",
                    "HOROVOD_HOSTNAME": bind.split("@", 1)[-1],
                    "HOROVOD_SLOT_HOSTNAME": slot_host.split("@", 1)[-1]})
        return env

    def _start(self, supervisor, new_id, key):
        """Start rank ``new_id`` on host ``key``; OSError if it cannot be started."""
        env = self._rank_env(new_id, key)
        secret = self.server.secret
        if key == "localhost":
            env[auth.SECRET_ENV] = secret
            argv, stdin_data = list(self.args.command), None
            child_env = rank_env.process_env(os.environ, env)
        else:
            slot = argparse.Namespace(hostname=key)
            argv, _ = self.plan.rank_argv(slot, env, os.getcwd(),
                                          stdin_vars=(auth.SECRET_ENV,))
            child_env = rank_env.process_env(os.environ, {})
            stdin_data = (secret + "\n").encode("ascii")
        supervisor.spawn(new_id, key, argv, child_env, os.getcwd(),
                         self.args.output_filename, stdin_data=stdin_data, redact=secret)

    def tick(self, supervisor):
        if any(p.returncode == 0 for p in supervisor.procs):
            return  # the job is finishing: no rank joins any more
        for host in self.blacklist.returned():
            log_line("%s's blacklist cooldown is over: ranks may start on it again" % host)
        hosts = self.discovery.poll()
        if hosts is None:
            return
        limit = self.args.max_np if self.args.max_np is not None else self.args.num_proc
        running = [p for p in supervisor.procs if p.returncode is None]
        per_host = {}
        for p in running:
            key = self._host_key(p.host)
            per_host[key] = per_host.get(key, 0) + 1
        room = limit - len(running)
        changed = False
        for key, slots in self._offered(hosts):
            started = []
            while room > 0 and per_host.get(key, 0) < slots:
                new_id = max(self.ids) + 1
                try:
                    self._start(supervisor, new_id, key)
                except OSError as e:
                    log_line("host discovery: cannot start a rank on %s: %s"
                             % (key, e.strerror or e))
                    break
                self.ids.append(new_id)
                started.append(new_id)
                per_host[key] = per_host.get(key, 0) + 1
                room -= 1
            if started:
                changed = True
                log_line("host discovery: %d slot(s) on %s; started rank(s) %s, which "
                         "join at the running ranks' next commit"
                         % (slots, key, ", ".join(str(i) for i in started)))
        if changed:
            self.server.store.put("tf_hvd/elastic/ids",
                                  ",".join(str(i) for i in self.ids).encode())


def _run_once(plan, restart):
    """One run of the whole job: (exit code, whether a restart may help, why it failed)."""
    args = plan.args
    cwd = os.getcwd()
    bind = plan.rendezvous_bind_address()
    rendezvous_addr = plan.launcher_address()
    secret = auth.new_secret()
    # verbose=False: its per-request log would drown everything else
    server = RendezvousServer(bind, port=args.rendezvous_port, secret=secret,
                              on_refusal=_refusal_logger(secret))
    try:
        server.start()
    except OSError as e:
        sys.stderr.write("tfhvdrun: error: cannot start the rendezvous server on %s:%d: %s%s\n"
                         % (bind, args.rendezvous_port, e.strerror or e,
                            " (choose another --rendezvous-port, or 0 for any free port)"
                            if args.rendezvous_port else ""))
        sys.stderr.flush()
        return USAGE_EXIT, False, None
    signals = SignalCatcher()
    signals.install()
    elastic = None
    if getattr(args, "min_np", None) is not None:
        elastic = argparse.Namespace(min_np=args.min_np, timeout=args.elastic_timeout,
                                     reset_limit=args.reset_limit)
    joiner = None
    if elastic is not None:
        server.store.put("tf_hvd/elastic/ids",
                         ",".join(str(s.rank) for s in plan.slots).encode())
        if args.host_discovery_script:
            joiner = _Joiner(plan, server, args)
    supervisor = Supervisor(signals, fault_records=lambda: fault_records(server.store),
                            elastic=elastic, tick=joiner and (lambda: joiner.tick(supervisor)),
                            on_rank_lost=joiner and joiner.rank_lost)

    def verbose(message):
        if args.verbose:
            log_line(auth.mask(message, secret))

    try:
        envs = plan.gloo_envs(rendezvous_addr, server.port)
        verbose("rendezvous server on %s:%d (bound to %s; requests must be signed with "
                "the job's secret, %s=%s)" % (rendezvous_addr, server.port, bind,
                                              auth.SECRET_ENV, auth.MASK))
        start_deadline = time.monotonic() + getattr(plan, "start_timeout", 30.0)
        for slot, env in zip(plan.slots, envs):
            if signals.pending():
                break  # stopped while starting: supervisor.wait() handles it
            if time.monotonic() > start_deadline:
                log_line("could not start rank(s) %s within the start-up timeout of %s s "
                         "(--start-timeout / HOROVOD_START_TIMEOUT)"
                         % (_rank_list(range(slot.rank, len(plan.slots))),
                            rank_env._number(plan.start_timeout)))
                supervisor.abort()
                return 1
            env = dict(env)
            env[RESTART_ENV] = str(restart)
            if elastic is not None:
                env.update(_elastic_env(elastic))
            argv, local = plan.rank_argv(slot, env, cwd, stdin_vars=(auth.SECRET_ENV,))
            verbose("rank %d on %s (local %d/%d, cross %d/%d): %s"
                    % (slot.rank, slot.hostname, slot.local_rank, slot.local_size,
                       slot.cross_rank, slot.cross_size,
                       " ".join(shlex.quote(a) for a in argv)))
            if local:
                extra = dict(env)
                extra[auth.SECRET_ENV] = secret
                child_env = rank_env.process_env(os.environ, extra)
                stdin_data = None
            else:
                child_env = rank_env.process_env(os.environ, {})
                stdin_data = (secret + "\n").encode("ascii")
            try:
                supervisor.spawn(slot.rank, slot.hostname, argv, child_env, cwd,
                                 args.output_filename, stdin_data=stdin_data, redact=secret)
            except OSError as e:
                log_line("cannot start rank %d (%s): %s"
                         % (slot.rank, argv[0], e.strerror or e))
                supervisor.abort()
                return (127 if e.errno == errno.ENOENT else 126), False, None
        code = supervisor.wait()
        if code != 0:
            _report_missing_ranks(server, len(plan.slots))
        restartable = supervisor.failed is not None and supervisor.signalled is None
        return code, restartable, supervisor.report
    finally:
        signals.restore()
        server.stop()
        if server.refusals > 1:
            log_line("warning: the rendezvous server refused %d requests in all"
                     % server.refusals)

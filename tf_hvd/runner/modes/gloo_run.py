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

from ...job import auth
from ...job import rank_env
from ..processes import failures
from ..elastic.elastic_hosts import ElasticHosts, elastic_fields
from .outcome import RunOutcome
from ...job.rendezvous import RendezvousServer
from ..processes.signals import SignalCatcher
from ..processes.supervisor import Supervisor, log_line

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


def run(plan):
    """Run the job described by ``plan``, restarting it after a rank's failure up to
    ``--max-restarts`` times; return the launcher's exit code."""
    limit = getattr(plan.args, "max_restarts", 0) or 0
    restart = 0
    while True:
        outcome = _run_once(plan, restart)
        if not outcome.failed or not outcome.restartable or limit == 0:
            return outcome.code
        if restart == limit:
            log_line("giving up: the job failed %d time(s), more than --max-restarts %d "
                     "allows (last failure: %s)" % (restart + 1, limit, outcome.why))
            return outcome.code
        restart += 1
        log_line("restarting every rank with a fresh rendezvous (restart %d of %d) because "
                 "%s" % (restart, limit, outcome.why))


def _run_once(plan, restart):
    """One run of the whole job, as a RunOutcome."""
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
        return RunOutcome(USAGE_EXIT)
    signals = SignalCatcher()
    signals.install()
    elastic = None
    if getattr(args, "min_np", None) is not None:
        elastic = argparse.Namespace(min_np=args.min_np, timeout=args.elastic_timeout,
                                     reset_limit=args.reset_limit)
    hosts = ElasticHosts(plan, server, args) if elastic is not None else None
    supervisor = Supervisor(signals, fault_records=lambda: fault_records(server.store),
                            elastic=elastic, tick=hosts and (lambda: hosts.tick(supervisor)),
                            on_rank_lost=hosts and (
                                lambda proc: hosts.rank_lost(proc, supervisor)),
                            state_lost=hosts and (lambda: hosts.state_lost(supervisor)))

    def verbose(message):
        if args.verbose:
            log_line(auth.mask(message, secret))

    try:
        rank_envs = plan.rank_envs(rendezvous_addr, server.port)
        verbose("rendezvous server on %s:%d (bound to %s; requests must be signed with "
                "the job's secret, %s=%s)" % (rendezvous_addr, server.port, bind,
                                              auth.SECRET_ENV, auth.MASK))
        start_deadline = time.monotonic() + plan.start_timeout
        for slot, rank in zip(plan.slots, rank_envs):
            if signals.pending():
                break  # stopped while starting: supervisor.wait() handles it
            if time.monotonic() > start_deadline:
                why = ("could not start rank(s) %s within the start-up timeout of %s s "
                       "(--start-timeout / HOROVOD_START_TIMEOUT)"
                       % (_rank_list(range(slot.rank, len(plan.slots))),
                          rank_env.number_text(plan.start_timeout)))
                log_line(why)
                supervisor.abort()
                # Not restartable: a restart meets the same slow start.
                return RunOutcome(1, restartable=False, why=why)
            rank = rank.replace(restart_count=restart)
            if elastic is not None:
                rank = rank.replace(elastic_host=slot.hostname.split("@", 1)[-1],
                                    **elastic_fields(elastic.timeout, elastic.min_np))
            argv, child_env, stdin_data = plan.rank_process(slot, rank, secret, cwd)
            verbose("rank %d on %s (local %d/%d, cross %d/%d): %s"
                    % (slot.rank, slot.hostname, slot.local_rank, slot.local_size,
                       slot.cross_rank, slot.cross_size,
                       " ".join(shlex.quote(a) for a in argv)))
            try:
                supervisor.spawn(slot.rank, slot.hostname, argv, child_env, cwd,
                                 args.output_filename, stdin_data=stdin_data, redact=secret)
            except OSError as e:
                log_line("cannot start rank %d (%s): %s"
                         % (slot.rank, argv[0], e.strerror or e))
                supervisor.abort()
                return RunOutcome(127 if e.errno == errno.ENOENT else 126)
        code = supervisor.wait()
        if code != 0:
            _report_missing_ranks(server, len(plan.slots))
        restartable = supervisor.failed is not None and supervisor.signalled is None and \
            supervisor.lost_report is None
        return RunOutcome(code, restartable, supervisor.report)
    finally:
        signals.restore()
        server.stop()
        if server.refusals > 1:
            log_line("warning: the rendezvous server refused %d requests in all"
                     % server.refusals)

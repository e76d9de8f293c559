"""Gloo mode: serve the rendezvous store and start every rank (the agent supervises them).

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

from ...job import auth, fault_record
from ...job.rank_names import rank_brackets
from ...job.rendezvous import RendezvousServer
from ..agent import agent
from ..agent.outcome import RunOutcome
from ..agent.static_policy import StaticPolicy
from ..agent.elastic_policy import ElasticPolicy
from ..processes.output import log_line
from ..processes.rank_group import RankGroup
from ..processes.signals import SignalCatcher

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
                 % (rank_brackets(missing), server.bind_address, server.port))


fault_records = fault_record.from_store  # rank -> FaultRecord the ranks' cores wrote


def elastic_fields(timeout, min_np):
    """The RankEnv fields every rank of an elastic job gets (HOROVOD_ELASTIC=1 as under
    horovodrun, and how long the ranks may take to re-form).

        >>> elastic_fields(30, 2)
        {'elastic': True, 'elastic_timeout': 30, 'elastic_min_np': 2}
    """
    return {"elastic": True, "elastic_timeout": timeout, "elastic_min_np": min_np}


def run(plan):
    """Run the job described by ``plan``, restarting it after a rank's failure up to
    ``--max-restarts`` times (an elastic job: as its policy decides); its RunOutcome."""
    with SignalCatcher() as signals:
        job = GlooJob(plan)
        if plan.config.elastic is not None:
            policy = ElasticPolicy(job)
        else:
            policy = StaticPolicy(job, max_restarts=plan.config.max_restarts)
        return agent.run(plan, RankGroup(signals), policy)


class GlooJob(object):
    """Gloo mode's side of each run (static_policy.py): a fresh rendezvous with a fresh
    secret, then one rank process per slot."""

    launcher = None  # every rank is a process of ours

    def __init__(self, plan):
        self.plan, self.config = plan, plan.config
        self.size = len(plan.slots)
        self.start_timeout = plan.config.start_timeout
        self.server = self.secret = None

    def verbose(self, message):
        if self.config.verbose:
            log_line(auth.mask(message, self.secret))

    def prepare(self, restart):
        """Start this run's rendezvous server; a RunOutcome if it cannot start."""
        bind, port = self.plan.rendezvous_bind_address, self.config.rendezvous_port
        self.secret = auth.new_secret()
        # verbose=False: its per-request log would drown everything else
        self.server = RendezvousServer(bind, port=port, secret=self.secret,
                                       on_refusal=_refusal_logger(self.secret))
        try:
            self.server.start()
        except OSError as e:
            self.server = None
            sys.stderr.write("tfhvdrun: error: cannot start the rendezvous server on %s:%d: "
                             "%s%s\n" % (bind, port, e.strerror or e,
                                         " (choose another --rendezvous-port, or 0 for any "
                                         "free port)" if port else ""))
            sys.stderr.flush()
            return RunOutcome(USAGE_EXIT)
        self.verbose("rendezvous server on %s:%d (bound to %s; requests must be signed with "
                     "the job's secret, %s=%s)" % (self.plan.launcher_address,
                                                   self.server.port, bind, auth.SECRET_ENV,
                                                   auth.MASK))
        return None

    def starts(self, restart):
        """The Start of every rank, in rank order (built as each is started)."""
        plan, cwd = self.plan, os.getcwd()
        rank_envs = plan.rank_envs(plan.launcher_address, self.server.port)
        for slot, rank in zip(plan.slots, rank_envs):
            rank = rank.replace(restart_count=restart)
            elastic = self.config.elastic
            if elastic is not None:
                rank = rank.replace(elastic_host=slot.hostname.split("@", 1)[-1],
                                    **elastic_fields(elastic.timeout, elastic.min_np))
            argv, child_env, stdin_data = plan.rank_process(slot, rank, self.secret, cwd)
            self.verbose("rank %d on %s (local %d/%d, cross %d/%d): %s"
                         % (slot.rank, slot.hostname, slot.local_rank, slot.local_size,
                            slot.cross_rank, slot.cross_size,
                            " ".join(shlex.quote(a) for a in argv)))
            yield agent.Start(slot.rank, slot.hostname, argv, child_env, cwd,
                              self.config.output_filename, stdin_data, self.secret)

    def can_join(self, host):
        """Whether a rank on ``host`` can join (not on a job that listens on loopback
        only, unless the host is this machine)."""
        return not self.plan.loopback_only or self.plan.is_local(host)

    def new_rank(self, new_id, host):
        """The Start of rank ``new_id``, which an elastic job adds on ``host``: rank 0's
        variables with its own rank and host, started as the others are (this machine:
        the command itself; inside a Slurm allocation: srun, which carries the process
        environment; else ssh, the secret on its stdin)."""
        plan, addr, cwd = self.plan, self.plan.launcher_address, os.getcwd()
        bind = addr if plan.is_local(host) else host
        name = host.split("@", 1)[-1]
        elastic = self.config.elastic
        rank = plan.rank_envs(addr, self.server.port)[0].replace(
            rank=new_id, elastic_id=new_id, elastic_join=True, restart_count=0,
            hostname=bind.split("@", 1)[-1], slot_hostname=name, elastic_host=name,
            **elastic_fields(elastic.timeout, elastic.min_np))
        argv, child_env, stdin_data = plan.rank_process(argparse.Namespace(hostname=host),
                                                        rank, self.secret, cwd)
        return agent.Start(new_id, host, argv, child_env, cwd, self.config.output_filename,
                           stdin_data, self.secret)

    @staticmethod
    def cannot_start(start, error):
        return ("cannot start rank %d (%s): %s" % (start.rank, start.argv[0],
                                                   error.strerror or error),
                127 if error.errno == errno.ENOENT else 126)

    def fault_records(self):
        return fault_records(self.server.store)

    def ended(self, outcome):
        if outcome.code != 0:
            _report_missing_ranks(self.server, self.size)

    def close(self):
        if self.server is None:
            return
        self.server.stop()
        if self.server.refusals > 1:
            log_line("warning: the rendezvous server refused %d requests in all"
                     % self.server.refusals)
        self.server = None

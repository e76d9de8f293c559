"""Gloo mode: serve the rendezvous store, start every rank, supervise them."""

import errno
import os
import shlex

from . import env as rank_env
from .rendezvous import RendezvousServer
from .signals import SignalCatcher
from .supervisor import Supervisor, log_line


def run(plan):
    """Run the job described by ``plan``; return the launcher's exit code."""
    args = plan.args
    cwd = os.getcwd()
    bind = plan.rendezvous_bind_address()
    rendezvous_addr = plan.launcher_address()
    server = RendezvousServer(bind)  # its per-request log would drown everything else
    server.start()
    signals = SignalCatcher()
    signals.install()
    supervisor = Supervisor(signals)
    try:
        envs = plan.gloo_envs(rendezvous_addr, server.port)
        if args.verbose:
            log_line("rendezvous server on %s:%d (bound to %s)"
                     % (rendezvous_addr, server.port, bind))
        for slot, env in zip(plan.slots, envs):
            if signals.pending():
                break  # stopped while starting: supervisor.wait() handles it
            argv, local = plan.rank_argv(slot, env, cwd)
            if args.verbose:
                log_line("rank %d on %s (local %d/%d, cross %d/%d): %s"
                         % (slot.rank, slot.hostname, slot.local_rank, slot.local_size,
                            slot.cross_rank, slot.cross_size,
                            " ".join(shlex.quote(a) for a in argv)))
            child_env = rank_env.process_env(os.environ, env if local else {})
            try:
                supervisor.spawn(slot.rank, slot.hostname, argv, child_env, cwd,
                                 args.output_filename)
            except OSError as e:
                log_line("cannot start rank %d (%s): %s"
                         % (slot.rank, argv[0], e.strerror or e))
                supervisor.abort()
                return 127 if e.errno == errno.ENOENT else 126
        return supervisor.wait()
    finally:
        signals.restore()
        server.stop()

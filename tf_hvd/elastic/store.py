"""This process's line to the elastic launcher: its rendezvous store, the variables
the launcher starts a rank with, and what this process has seen of the job.

    from tf_hvd.elastic import store

    if store.elastic_launcher():          # started by tfhvdrun --min-np or Ray
        version = store.hosts_version()   # changes when the launcher adds ranks
        with store.client() as s:
            s.get(...)

Callers read ``store.client()`` and ``store.seen`` through the module, so a test
stands an in-memory store in for the launcher's by patching ``client`` here.
"""

import os
import socket

from tf_hvd.job import rank_env
from tf_hvd.job.elastic_state import COMMIT_KEY, HOSTS_VERSION_KEY
from tf_hvd.job.rendezvous import RendezvousClient

ROUND_ENV = "HOROVOD_ELASTIC_ROUND"   # the round of the job's current form (knob)
ID_ENV = rank_env.ELASTIC_ID          # this process's id: its rank when the launcher started it
JOIN_ENV = rank_env.ELASTIC_JOIN      # "1": started by the launcher to join a running job
HOST_ENV = rank_env.ELASTIC_HOST      # the host the launcher started this process on

# What this process has seen: the launcher's hosts version at the last round, the
# round it is in, and holds: whether it has the job's committed state (a newcomer
# once it has synced).
seen = {"hosts_version": None, "round": 0, "holds": True}


def client():
    """A client of the launcher's rendezvous store (a context manager)."""
    return RendezvousClient.from_env(os.environ, timeout=10)


def hosts_version(commits=None):
    """The launcher's hosts version (None before it published one); with ``commits``,
    first tell the launcher how far the job got (named should the state be lost)."""
    with client() as s:
        if commits is not None:
            s.put(COMMIT_KEY, str(commits).encode())
        value = s.get(HOSTS_VERSION_KEY)
    return value.decode() if value is not None else None


def elastic_launcher():
    """Whether an elastic launcher (tfhvdrun --min-np, Ray's elastic executor) started
    this process: it then reads the launcher's store at commits and re-forms."""
    return rank_env.RankEnv.from_environ(os.environ).elastic_min_np is not None


def my_host():
    """The host the launcher started this process on (else this machine's name)."""
    return rank_env.RankEnv.from_environ(os.environ).elastic_host or socket.gethostname()

"""Driver-side pieces both executors share: the job's rendezvous server, actor
creation and collecting results from actors with the failing rank named."""

import sys

import ray

from tf_hvd.job.job_server import start_job_server
from tf_hvd.ray.errors import worker_error
from tf_hvd.ray.worker import RankWorker

_RemoteWorker = None


def log(message):
    sys.stderr.write("tf_hvd.ray: %s\n" % message)
    sys.stderr.flush()


def require_ray():
    if not ray.is_initialized():
        raise RuntimeError("Ray is not initialised in this process: call ray.init() "
                           "(ray.init(address='auto') to join a running cluster) before "
                           "starting the executor")


def start_rendezvous():
    """A fresh secret and an authenticated rendezvous server on this node's address
    (the ranks reach the driver there); returns (server, address)."""
    address = ray.util.get_node_ip_address()
    return start_job_server(address, log), address


def knobs(nics=None, extra_env_vars=None):
    """Variables every rank gets besides its topology (``nics``: Gloo binds the first)."""
    env = {}
    if nics:
        env["HOROVOD_GLOO_IFACE"] = nics[0]
    env.update({str(k): str(v) for k, v in (extra_env_vars or {}).items()})
    return env


def new_actor(**options):
    """A RankWorker actor with Ray ``options`` (resources, scheduling strategy)."""
    global _RemoteWorker
    if _RemoteWorker is None:
        _RemoteWorker = ray.remote(RankWorker)
    # One task at a time per actor; a dead actor is not restarted behind our back.
    return _RemoteWorker.options(max_restarts=0, max_concurrency=1, **options).remote()


def gather(refs, ranks, hosts, timeout=None):
    """Results of ``refs`` (refs[i] from rank ranks[i] on hosts[i]) in order. The first
    failure is raised at once, naming its rank (the others may be stuck waiting for it
    in a collective)."""
    index = {ref: i for i, ref in enumerate(refs)}
    results = [None] * len(refs)
    pending = list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1, timeout=timeout)
        if not ready:
            raise TimeoutError("rank(s) %s did not finish within %s s"
                               % (sorted(ranks[index[r]] for r in pending), timeout))
        i = index[ready[0]]
        try:
            results[i] = ray.get(ready[0])
        except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as e:
            raise worker_error(ranks[i], hosts[i], e)
    return results


def kill_all(actors):
    for actor in actors:
        try:
            ray.kill(actor, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass

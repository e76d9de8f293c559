"""Driver-side pieces both executors share: the job's rendezvous server, actor
creation and collecting results from actors with the failing rank named."""

import sys

import ray

from tf_hvd.job import failure_report, fault_record, silent_ranks
from tf_hvd.job.job_server import start_job_server
from tf_hvd.ray import errors
from tf_hvd.ray.worker import RankWorker

# The root rank's own failure may reach the driver just after a consequence's (both come
# at once when it is killed): after the first failure, the others get this long to end.
ROOT_END_WAIT_S = 3.0

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


def gather(refs, ranks, hosts, timeout=None, pids=None, store=None, actors=None):
    """Results of ``refs`` (refs[i] from rank ranks[i] on hosts[i], pid pids[i]) in order.
    The first failure ends the wait: the job's error names the root cause, as every
    launcher does, from the failed calls and the cores' fault records in ``store`` (the
    others may be stuck waiting for it in a collective). A rank the others' cores
    declared silent (frozen) is killed (its actor in ``actors``)."""
    pids = pids or [None] * len(refs)
    index = {ref: i for i, ref in enumerate(refs)}
    results = [None] * len(refs)
    ends = {r: failure_report.RankEnd(r, h, p) for r, h, p in zip(ranks, hosts, pids)}
    pending = list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1, timeout=timeout)
        if not ready:
            raise TimeoutError("rank(s) %s did not finish within %s s"
                               % (sorted(ranks[index[r]] for r in pending), timeout))
        i = index[ready[0]]
        try:
            results[i] = ray.get(ready[0])
            ends[ranks[i]] = ends[ranks[i]]._replace(ok=True)
        except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as e:
            ends[ranks[i]] = errors.rank_end(ranks[i], hosts[i], pids[i], e)
            raise _job_error(ends, store, pending, index, ranks, hosts, pids, actors)
    return results


def _job_error(ends, store, pending, index, ranks, hosts, pids, actors):
    """The job's error once the first call failed: the other calls get ROOT_END_WAIT_S to
    end (the root's own failure may come just after a consequence's), a frozen rank's
    actor is killed, and the root cause is named from what came and the cores' records."""
    records = fault_record.from_store(store) if store is not None else {}
    silent = silent_ranks.silent(records)
    waiting = [ref for ref in pending if ranks[index[ref]] not in silent]
    if waiting:
        done, _ = ray.wait(waiting, num_returns=len(waiting), timeout=ROOT_END_WAIT_S)
        for ref in done:
            i = index[ref]
            try:
                ray.get(ref)
                ends[ranks[i]] = ends[ranks[i]]._replace(ok=True)
            except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as e:
                ends[ranks[i]] = errors.rank_end(ranks[i], hosts[i], pids[i], e)
        records = fault_record.from_store(store) if store is not None else {}
        silent = silent_ranks.silent(records)
    killed = set()
    for r in silent:  # a frozen rank never ends by itself
        if actors is not None and r in ranks:
            kill_all([actors[ranks.index(r)]])
            killed.add(r)
    return errors.job_error(ends, records, killed)


def kill_all(actors):
    for actor in actors:
        try:
            ray.kill(actor, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass

"""ElasticRayExecutor: an elastic tf_hvd job whose workers follow Ray's nodes.

    import ray, tf_hvd.elastic
    from tf_hvd.ray import ElasticRayExecutor

    ray.init(address="auto")
    settings = ElasticRayExecutor.create_settings(min_np=2, max_np=4)
    executor = ElasticRayExecutor(settings, cpus_per_slot=1)
    executor.start()

    def train():
        import tf_hvd as hvd
        hvd.init()
        state = tf_hvd.elastic.TensorFlowKerasState(model, optimizer, batch=0)

        @tf_hvd.elastic.run
        def loop(state):
            ...                     # state.commit() every few batches
        loop(state)
        return model.get_weights()

    results = executor.run(train)   # one result per worker that finished

Every alive Ray node offers ``CPU // cpus_per_slot`` slots (and ``GPU // gpus_per_slot``
with use_gpu); ``run`` waits until ``min_np`` slots exist, starts up to ``max_np``
workers (one actor per slot, pinned to its node) and then:

* a worker that dies (its process killed, its node gone) is dropped: the survivors'
  next collective fails, tf_hvd.elastic rolls them back to their last commit and they
  go on as a smaller job (at least ``min_np``); no worker starts on that node again
  during this run;
* a node that appears (or frees slots) gets workers up to ``max_np``; the running
  workers wait for them at their next commit (``check_host_updates``), at most
  ``elastic_timeout`` after their start, and hand them the committed state there; a
  newcomer that has not come by then is stopped, named, and its node gets no worker
  again during this run.

The committed state is never dropped silently (tf_hvd/job/elastic_state.py, as under
tfhvdrun): the driver stops no worker that holds it (it stops only newcomers that came
too late, which never held it), and when every worker that held it is gone (killed, its
node lost) before a newcomer received it, ``run`` raises HorovodInternalError saying the
state was lost and at which commit, instead of letting the newcomers start over.

The meeting of the survivors and newcomers goes through the driver's authenticated
rendezvous store, exactly as under ``tfhvdrun --min-np`` (tf_hvd/elastic/).
"""

import time

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from tf_hvd.exceptions import HorovodInternalError
from tf_hvd.ray import driver, topology
from tf_hvd.ray.errors import worker_error
from tf_hvd.ray.settings import create_settings
from tf_hvd.job.elastic_state import IDS_KEY, StateHolders, format_ids, id_list


class _Worker(object):
    def __init__(self, wid, actor, node_id, ip):
        self.id, self.actor, self.node_id, self.ip = wid, actor, node_id, ip
        self.ref = None
        self.pid = None  # its actor's process, named when it fails (set with its env)


class ElasticRayExecutor(object):
    """Runs one elastic function on workers that come and go with Ray's nodes."""

    create_settings = staticmethod(create_settings)

    def __init__(self, settings, use_gpu=False, cpus_per_slot=1, gpus_per_slot=None,
                 env_vars=None, override_discovery=True):
        del override_discovery  # discovery is always Ray's node list
        self.settings = settings
        self.cpus_per_slot = cpus_per_slot
        self.gpus_per_slot = (gpus_per_slot or 1) if use_gpu else 0
        self.env_vars = dict(env_vars or {})
        self._server = None
        self._address = None
        self.workers = {}       # id -> _Worker still running
        self.lost = []          # ids of the workers that died
        self.blacklist = set()  # node ids where a worker died
        self.resets = 0
        self.holders = None     # StateHolders of the running job
        self._lost_holders = []  # (worker, why) of holders lost since the state last moved

    def start(self):
        """Start the job's rendezvous server (the workers start in ``run``)."""
        driver.require_ray()
        if self._server is None:
            self._server, self._address = driver.start_rendezvous()

    def shutdown(self):
        driver.kill_all([w.actor for w in self.workers.values()])
        self.workers = {}
        if self._server is not None:
            self._server.stop()
            self._server = None

    # -- discovery --------------------------------------------------------------------
    def _slots(self):
        """[(node id, node IP, free slots)] of the alive, not blacklisted nodes."""
        used = {}
        for w in self.workers.values():
            used[w.node_id] = used.get(w.node_id, 0) + 1
        found = []
        for node in ray.nodes():
            if not node.get("Alive") or node["NodeID"] in self.blacklist:
                continue
            resources = node.get("Resources", {})
            n = int(resources.get("CPU", 0) // self.cpus_per_slot) if self.cpus_per_slot \
                else 1 << 20
            if self.gpus_per_slot:
                n = min(n, int(resources.get("GPU", 0) // self.gpus_per_slot))
            free = n - used.get(node["NodeID"], 0)
            if free > 0:
                found.append((node["NodeID"], node["NodeManagerAddress"], free))
        return sorted(found, key=lambda f: f[1])

    def _max_np(self):
        return self.settings.max_np if self.settings.max_np is not None else 1 << 20

    def _new_workers(self, room):
        """Actors on free slots, up to ``room`` of them (node by node)."""
        made = []
        next_id = max(list(self.workers) + self.lost + [-1]) + 1
        for node_id, ip, free in self._slots():
            for _ in range(min(free, room - len(made))):
                actor = driver.new_actor(
                    num_cpus=self.cpus_per_slot, num_gpus=self.gpus_per_slot,
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False))
                made.append(_Worker(next_id, actor, node_id, ip))
                next_id += 1
        return made

    # -- environment ------------------------------------------------------------------
    def _elastic_fields(self, wid, joining):
        """The RankEnv fields of worker ``wid``; a joining one takes its id as its rank
        (tf_hvd.elastic meets the running workers in their next round)."""
        fields = dict(elastic_id=wid, elastic_min_np=self.settings.min_np or 1,
                      elastic_timeout=self.settings.elastic_timeout)
        if joining:
            fields.update(rank=wid, elastic_join=True)
        return fields

    def _set_envs(self, workers, joining):
        timeout = self.settings.timeout_s
        infos = [topology.NodeInfo(*i) for i in
                 ray.get([w.actor.node.remote() for w in workers], timeout=timeout)]
        knobs = driver.knobs(self.settings.nics, self.env_vars)
        slots = topology.rank_slots(infos)
        refs = []
        for slot, info, w in zip(slots, infos, workers):
            env = topology.rank_env_for(slot, info, self._address, self._server.port,
                                        self._server.secret, knobs,
                                        **self._elastic_fields(w.id, joining))
            refs.append(w.actor.set_env.remote(env))
        pids = ray.get([w.actor.pid.remote() for w in workers], timeout=timeout)
        for w, pid in zip(workers, pids):
            w.pid = pid
        driver.gather(refs, [w.id for w in workers], [w.ip for w in workers], timeout,
                      pids=pids)

    def _publish_ids(self):
        ids = sorted(list(self.workers))
        self._server.store.put(IDS_KEY, format_ids(ids))

    # -- running ----------------------------------------------------------------------
    def _wait_for_slots(self):
        deadline = time.monotonic() + self.settings.elastic_timeout
        need = self.settings.min_np or 1
        while sum(f[2] for f in self._slots()) < need:
            if time.monotonic() > deadline:
                raise TimeoutError("Ray offers fewer than min_np=%d slots (of %s CPU each) "
                                   "after %g s (elastic_timeout)"
                                   % (need, self.cpus_per_slot, self.settings.elastic_timeout))
            time.sleep(self.settings.discovery_interval_s)

    def _launch(self, workers, worker_fn, joining):
        for w in workers:
            self.workers[w.id] = w
        self._set_envs(workers, joining)
        self._publish_ids()
        for w in workers:
            w.ref = w.actor.run.remote(worker_fn)

    def run(self, worker_fn, callbacks=None):
        """Run ``worker_fn()`` on the workers until they finish; returns their results,
        in worker order (the order of their final ranks)."""
        if callbacks:
            raise NotImplementedError("ElasticRayExecutor.run(callbacks=...) is not "
                                      "supported by tf_hvd; return results from worker_fn")
        if self._server is None:
            raise RuntimeError("the ElasticRayExecutor is not started: call start() first")
        try:
            return self._run(worker_fn)
        finally:
            driver.kill_all([w.actor for w in self.workers.values()])
            self.workers = {}

    def _run(self, worker_fn):
        self._wait_for_slots()
        first = self._new_workers(self._max_np())
        self.holders = StateHolders(self._server.store, [w.id for w in first])
        self._lost_holders = []
        self._launch(first, worker_fn, joining=False)
        results = {}
        interval = self.settings.discovery_interval_s
        while any(w.ref is not None for w in self.workers.values()):
            running = {w.ref: w for w in self.workers.values() if w.ref is not None}
            ready, _ = ray.wait(list(running), num_returns=1, timeout=interval)
            for ref in ready:
                self._collect(running[ref], results)
            if not results:  # nobody finished yet: new slots get workers
                if self.holders.refresh():
                    self._lost_holders = []
                self._drop_late()
                self._grow(worker_fn)
        return [results[i] for i in sorted(results)]

    def _collect(self, w, results):
        try:
            results[w.id] = ray.get(w.ref)
            w.ref = None
        except ray.exceptions.RayActorError as e:
            del self.workers[w.id]
            self._publish_ids()  # the survivors re-form without it at once
            self.lost.append(w.id)
            self.blacklist.add(w.node_id)
            why = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
            self._forget(w, "worker %d on %s died (%s)" % (w.id, w.ip, why), results)
            self._count_reset()
            left = len(self.workers)
            driver.log("worker %d on %s died (%s); %d worker(s) go on from their last "
                       "commit, none starts on that node again" % (w.id, w.ip, why, left))
            if left < (self.settings.min_np or 1):
                raise HorovodInternalError(
                    "worker %d on %s died and only %d worker(s) are left, fewer than "
                    "min_np=%d" % (w.id, w.ip, left, self.settings.min_np or 1))
        except ray.exceptions.RayTaskError as e:
            error = worker_error(w.id, w.ip, e, label="worker", pid=w.pid)
            if isinstance(error, HorovodInternalError):
                # a newcomer's reset that found no holder says so: the driver names them
                self._forget(w, "worker %d on %s failed (%s)" % (w.id, w.ip, error),
                             results, cause=error)
            raise error

    # -- the committed state ----------------------------------------------------------
    def _forget(self, w, why, results, cause=None):
        """Worker ``w`` is gone; raise HorovodInternalError when no running worker holds
        the committed state any more (the job must not start over from nothing)."""
        if self.holders.refresh():
            self._lost_holders = []
        if self.holders.holds(w.id):
            self._lost_holders.append(why)
        self.holders.forget(w.id)
        others = [i for i in self.workers if i != w.id]
        if results or [i for i in others if self.holders.holds(i)]:
            return
        message = self._state_lost(others)
        driver.log(message)
        raise HorovodInternalError(message) from cause

    def _state_lost(self, newcomers):
        return ("the job failed: its committed state was lost at commit %d: the worker(s) "
                "that held it are gone (%s)%s; tf_hvd does not start a job over from "
                "nothing: restart it from a checkpoint of your own"
                % (self.holders.commit(), "; ".join(self._lost_holders) or "none is left",
                   (", and worker(s) %s, which joined later, had not received it"
                    % id_list(newcomers)) if newcomers else ""))

    def _drop_late(self):
        """Newcomers that have not come to the rendezvous within elastic_timeout of
        their start: stopped, their node gets no worker again; the others go on."""
        timeout = self.settings.elastic_timeout
        for i in self.holders.late(timeout):
            self.holders.forget(i)
            w = self.workers.pop(i, None)
            if w is None:
                continue
            self.blacklist.add(w.node_id)
            self.lost.append(w.id)
            self._publish_ids()  # the running workers' reset stops waiting for it
            driver.log("worker %d (on %s) has not come to the rendezvous within %g s "
                       "(elastic_timeout) of its start: stopping it, the others go on "
                       "without it; no worker starts on that node again" % (i, w.ip, timeout))
            driver.kill_all([w.actor])

    def _count_reset(self):
        self.resets += 1
        limit = self.settings.reset_limit
        if limit is not None and self.resets > limit:
            raise HorovodInternalError("the job changed %d times, more than reset_limit=%d"
                                       % (self.resets, limit))

    def _grow(self, worker_fn):
        room = self._max_np() - len(self.workers)
        if room <= 0 or not self._slots():
            return
        joiners = self._new_workers(room)
        if joiners:
            self._count_reset()
            driver.log("new slots on %s: started worker(s) %s, which the running workers "
                       "wait for at their next commit (at most %g s, elastic_timeout) to "
                       "hand them the committed state"
                       % (", ".join(sorted(set(w.ip for w in joiners))),
                          id_list(w.id for w in joiners), self.settings.elastic_timeout))
            self._launch(joiners, worker_fn, joining=True)
            # listed first (_launch publishes the ids): the running workers' reset waits
            self.holders.started([w.id for w in joiners])

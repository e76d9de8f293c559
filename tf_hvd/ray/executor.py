"""RayExecutor: a tf_hvd job whose ranks are Ray actors (Horovod's horovod.ray API).

    import ray
    from tf_hvd.ray import RayExecutor

    ray.init()                      # or ray.init(address="auto") on a cluster
    settings = RayExecutor.create_settings(timeout_s=60)
    executor = RayExecutor(settings, num_workers=4, cpus_per_worker=1)
    executor.start()

    def train():
        import tf_hvd as hvd
        hvd.init()
        ...
        return hvd.rank()

    print(executor.run(train))      # [0, 1, 2, 3]
    executor.shutdown()

One actor per rank, placed by a placement group (``num_workers``: PACK, as few nodes as
possible; ``num_hosts`` x ``num_workers_per_host``: one bundle per node, STRICT_SPREAD).
The driver serves the job's authenticated rendezvous store (tf_hvd/job/rendezvous.py,
a fresh secret per ``start()``); every actor gets the variables tfhvdrun gives a Gloo
rank, so ``hvd.init()`` inside it joins the job.
"""

import ray
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from tf_hvd.ray import driver, topology
from tf_hvd.ray.settings import create_settings


class RayExecutor(object):
    """Runs functions on a fixed set of Ray actors that form one tf_hvd job."""

    create_settings = staticmethod(create_settings)

    def __init__(self, settings, num_workers=None, num_hosts=None, num_workers_per_host=1,
                 cpus_per_worker=1, use_gpu=False, gpus_per_worker=None,
                 use_current_placement_group=True):
        if (num_workers is None) == (num_hosts is None):
            raise ValueError("give either num_workers, or num_hosts (with "
                             "num_workers_per_host), not both and not neither")
        if num_workers is not None and int(num_workers) < 1:
            raise ValueError("num_workers must be at least 1, got %r" % (num_workers,))
        if num_hosts is not None and (int(num_hosts) < 1 or int(num_workers_per_host) < 1):
            raise ValueError("num_hosts and num_workers_per_host must be at least 1")
        if gpus_per_worker and not use_gpu:
            raise ValueError("gpus_per_worker is set but use_gpu is False")
        self.settings = settings
        self.num_workers = int(num_workers) if num_workers is not None else \
            int(num_hosts) * int(num_workers_per_host)
        self.num_hosts = int(num_hosts) if num_hosts is not None else None
        self.num_workers_per_host = int(num_workers_per_host)
        self.cpus_per_worker = cpus_per_worker
        self.gpus_per_worker = (gpus_per_worker or 1) if use_gpu else 0
        self.use_current_placement_group = use_current_placement_group
        self.workers = []   # actors, index = rank
        self.hosts = []     # node IP per rank
        self.pids = []      # each actor's process id, named when its rank fails
        self._placement_group = None
        self._server = None

    # -- start and stop -----------------------------------------------------------------
    def _bundles(self):
        if self.num_hosts is None:
            bundle = {"CPU": self.cpus_per_worker}
            if self.gpus_per_worker:
                bundle["GPU"] = self.gpus_per_worker
            return [dict(bundle) for _ in range(self.num_workers)], "PACK"
        bundle = {"CPU": self.cpus_per_worker * self.num_workers_per_host}
        if self.gpus_per_worker:
            bundle["GPU"] = self.gpus_per_worker * self.num_workers_per_host
        return [dict(bundle) for _ in range(self.num_hosts)], "STRICT_SPREAD"

    def _reserve(self):
        bundles, strategy = self._bundles()
        group = ray.util.placement_group(bundles, strategy=strategy)
        self._placement_group = group
        try:
            ray.get(group.ready(), timeout=self.settings.placement_group_timeout_s)
        except ray.exceptions.GetTimeoutError:
            raise TimeoutError(
                "Ray could not reserve %d bundle(s) of %s (%s) within %g s "
                "(placement_group_timeout_s); the cluster has %s"
                % (len(bundles), bundles[0], strategy,
                   self.settings.placement_group_timeout_s, ray.cluster_resources()))
        return group

    def start(self, executable_cls=None, executable_args=None, executable_kwargs=None,
              extra_env_vars=None):
        """Reserve the resources, start one actor per rank and give each its rank's
        variables; then (optionally) make ``executable_cls(*executable_args,
        **executable_kwargs)`` in every actor, for ``execute``."""
        driver.require_ray()
        if self.workers:
            raise RuntimeError("this RayExecutor is already started; shutdown() first")
        try:
            self._start(executable_cls, executable_args, executable_kwargs, extra_env_vars)
        except BaseException:
            self.shutdown()
            raise

    def _start(self, executable_cls, executable_args, executable_kwargs, extra_env_vars):
        group = self._reserve()
        actors = []
        for i in range(self.num_workers):
            bundle = i if self.num_hosts is None else i // self.num_workers_per_host
            actors.append(driver.new_actor(
                num_cpus=self.cpus_per_worker, num_gpus=self.gpus_per_worker,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    group, placement_group_bundle_index=bundle)))
        self.workers = actors  # so that shutdown() kills them if anything below fails
        timeout = self.settings.timeout_s
        infos = [topology.NodeInfo(*i) for i in
                 ray.get([a.node.remote() for a in actors], timeout=timeout)]
        order = topology.order_by_node(infos)
        self.workers = [actors[i] for i in order]
        infos = [infos[i] for i in order]
        self.hosts = [info.ip for info in infos]
        self.pids = ray.get([a.pid.remote() for a in self.workers], timeout=timeout)
        self._server, address = driver.start_rendezvous()
        gpus = topology.node_gpus(infos) if self.gpus_per_worker else {}
        knobs = driver.knobs(self.settings.nics, extra_env_vars)
        refs = []
        for slot, info, actor in zip(topology.rank_slots(infos), infos, self.workers):
            env = topology.rank_env_for(slot, info, address, self._server.port,
                                        self._server.secret, knobs,
                                        gpus.get(info.node_id))
            refs.append(actor.set_env.remote(env))
        self._gather(refs, timeout)
        self._gather([a.start_executable.remote(executable_cls, executable_args,
                                                executable_kwargs) for a in self.workers],
                     timeout)
        if self.settings.verbose:
            driver.log("started %d rank(s) on %s; rendezvous at %s:%d"
                       % (len(self.workers), sorted(set(self.hosts)), address,
                          self._server.port))

    def shutdown(self):
        """Kill the actors, release the placement group, stop the rendezvous server."""
        driver.kill_all(self.workers)
        self.workers, self.hosts, self.pids = [], [], []
        if self._placement_group is not None:
            try:
                ray.util.remove_placement_group(self._placement_group)
            except Exception:  # noqa: BLE001 - Ray already shut down
                pass
            self._placement_group = None
        if self._server is not None:
            self._server.stop()
            self._server = None

    # -- running functions ---------------------------------------------------------------
    def _require_started(self):
        if not self.workers:
            raise RuntimeError("the RayExecutor is not started: call start() first")

    def _gather(self, refs, timeout=None):
        return driver.gather(refs, list(range(len(refs))), self.hosts, timeout,
                             pids=self.pids or None,
                             store=self._server.store if self._server else None,
                             actors=self.workers)

    def run_remote(self, fn, args=None, kwargs=None):
        """``fn(*args, **kwargs)`` on every rank; returns Ray object refs (rank order)."""
        self._require_started()
        return [w.run.remote(fn, args, kwargs) for w in self.workers]

    def run(self, fn, args=None, kwargs=None):
        """``fn(*args, **kwargs)`` on every rank; returns the results in rank order. A
        rank that raises makes this raise the same type, naming the rank."""
        return self._gather(self.run_remote(fn, args, kwargs))

    def execute(self, fn):
        """``fn(executable)`` on every rank (the ``executable_cls`` instance made by
        ``start``, or None); returns the results in rank order."""
        self._require_started()
        return self._gather([w.execute.remote(fn) for w in self.workers])

    def execute_single(self, fn):
        """``fn(executable)`` on rank 0 only; returns its result."""
        self._require_started()
        return self._gather([self.workers[0].execute.remote(fn)])[0]

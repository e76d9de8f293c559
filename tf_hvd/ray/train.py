"""A Ray Train trainer for tf_hvd: Ray Train's DataParallelTrainer with a tf_hvd backend.

Ray Train (ray 2.x, Train V2) accepts third-party backends: a ``BackendConfig`` names a
``Backend`` whose ``on_start`` runs once the worker group exists. Ours gives every
training worker the variables of a Gloo rank (topology from the worker group, which Ray
orders by node; a fresh secret; the rendezvous server in Ray Train's controller), so
``hvd.init()`` in the training function joins the job. Needs ``ray[train]``.

    import ray.train
    from ray.train import ScalingConfig
    from tf_hvd.ray.train import TfHvdTrainer

    def train_loop(config):
        import tf_hvd.keras as hvd
        hvd.init()
        ...                                   # model.fit on this rank's shard
        ray.train.report({"loss": loss})

    trainer = TfHvdTrainer(train_loop, train_loop_config={"epochs": 2},
                           scaling_config=ScalingConfig(num_workers=4))
    result = trainer.fit()
"""

import dataclasses
import os
from typing import List, Optional

from ray.train.backend import Backend, BackendConfig
from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

from tf_hvd.ray import driver, topology


@dataclasses.dataclass
class TfHvdConfig(BackendConfig):
    """tf_hvd's Ray Train backend. ``nics``: interfaces Gloo binds (the first one is
    HOROVOD_GLOO_IFACE); ``env_vars``: extra variables for every rank (HOROVOD_* knobs)."""

    nics: Optional[List[str]] = None
    env_vars: Optional[dict] = None

    @property
    def backend_cls(self):
        return _TfHvdBackend


def _set_env(env):
    os.environ.update(env)


class _TfHvdBackend(Backend):
    # Ranks of a node see all its GPUs: hvd.local_rank() picks one, as with tfhvdrun.
    share_cuda_visible_devices = True

    def __init__(self):
        self._servers = {}  # id(worker group) -> its job's rendezvous server

    def on_start(self, worker_group, backend_config):
        workers = worker_group.get_workers()
        infos = [topology.NodeInfo(w.metadata.node_id, w.metadata.node_ip,
                                   w.metadata.hostname, []) for w in workers]
        if topology.order_by_node(infos) != list(range(len(infos))):
            raise RuntimeError("Ray Train's workers are not grouped by node; tf_hvd needs "
                               "the ranks of one node to be consecutive")
        server, address = driver.start_rendezvous()
        self._servers[id(worker_group)] = server
        knobs = driver.knobs(backend_config.nics, backend_config.env_vars)
        for i, (slot, info) in enumerate(zip(topology.rank_slots(infos), infos)):
            env = topology.rank_env_for(slot, info, address, server.port, server.secret,
                                        knobs)
            env = {k: str(v) for k, v in env.items()}
            worker_group.execute_single(i, _set_env, env)

    def on_shutdown(self, worker_group, backend_config):
        server = self._servers.pop(id(worker_group), None)
        if server is not None:
            server.stop()


class TfHvdTrainer(DataParallelTrainer):
    """Ray Train's data-parallel trainer running tf_hvd (Horovod API) in every worker."""

    def __init__(self, train_loop_per_worker, *, train_loop_config=None, tf_hvd_config=None,
                 scaling_config=None, run_config=None, datasets=None, dataset_config=None):
        DataParallelTrainer.__init__(
            self, train_loop_per_worker, train_loop_config=train_loop_config,
            backend_config=tf_hvd_config or TfHvdConfig(), scaling_config=scaling_config,
            run_config=run_config, datasets=datasets, dataset_config=dataset_config)

"""Training-side API of the tf.data service run by a tf_hvd compute job (Horovod's
horovod.tensorflow.data.compute_service).

A compute job (``tfhvdrun -np 4 python -m tf_hvd.data.compute_worker /tmp/compute.json``)
starts tf.data dispatchers and workers and writes a TfDataServiceConfig file; training
ranks read it and move dataset processing onto those workers:

    config = TfDataServiceConfig.read("/tmp/compute.json", wait_for_file_creation=True)
    ds = tf.data.Dataset.range(1000).map(heavy).send_to_data_service(
        config, hvd.rank(), hvd.size())
"""

import binascii
import contextlib
import dataclasses
import json
import logging
import os
import socket
import time
from typing import Any, Mapping, Optional, Sequence, Tuple

import tensorflow as tf

from tf_hvd import basics, ops, topology
from tf_hvd.data.registry import ComputeClient
from tf_hvd.job import network

DISPATCHER_SIDES = ("compute", "training")
SHARED_JOB_NAME = "job"
logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class TfDataServiceConfig:
    """Where the compute service is and how its dispatchers and workers are laid out.

    ``addresses`` maps an interface name to [(ip, port)] of the compute service; ``key``
    signs every request to it. ``timeout`` (s) bounds every wait for a registration.

    >>> cfg = TfDataServiceConfig(1, 2, "compute", {"lo": [("127.0.0.1", 4711)]}, b"k")
    >>> TfDataServiceConfig.from_dict(cfg.to_dict()) == cfg  # doctest: +SKIP
    True
    """
    dispatchers: int
    workers_per_dispatcher: int
    dispatcher_side: str
    addresses: Mapping[str, Sequence[Tuple[str, int]]]
    key: bytes
    timeout: int = 60

    def __post_init__(self):
        if self.dispatcher_side not in DISPATCHER_SIDES:
            raise ValueError("dispatcher_side must be 'compute' or 'training': %r"
                             % (self.dispatcher_side,))

    def compute_client(self, verbose=1) -> ComputeClient:
        return ComputeClient(self.addresses, self.key, verbose=verbose)

    def to_dict(self) -> Mapping[str, Any]:
        """JSON-able: the key as hex, addresses as lists."""
        config = dataclasses.asdict(self)
        config["key"] = binascii.hexlify(self.key).decode()
        return config

    @staticmethod
    def from_dict(config: Mapping[str, Any]) -> "TfDataServiceConfig":
        addresses = {nic: [(addr[0], int(addr[1])) for addr in addrs]
                     for nic, addrs in config["addresses"].items()}
        return TfDataServiceConfig(
            dispatchers=config["dispatchers"],
            workers_per_dispatcher=config["workers_per_dispatcher"],
            dispatcher_side=config["dispatcher_side"],
            addresses=addresses,
            key=binascii.unhexlify(config["key"]),
            timeout=config.get("timeout", 60))

    def write(self, filename: str):
        """Writes the config as JSON, atomically (readers never see half a file)."""
        partial = "%s.%d.tmp" % (filename, os.getpid())
        with open(partial, "w") as f:
            json.dump(self.to_dict(), f)
        os.replace(partial, filename)

    @staticmethod
    def read(filename: str, wait_for_file_creation: bool = False) -> "TfDataServiceConfig":
        """Reads a config written by ``write``; with ``wait_for_file_creation`` it waits
        (indefinitely, like Horovod) for the compute job to write it."""
        while wait_for_file_creation and not os.path.exists(filename):
            time.sleep(0.2)
        with open(filename) as f:
            return TfDataServiceConfig.from_dict(json.load(f))


def _reachable_target(server):
    """The server's target with this host's outward address instead of 'localhost', so
    ranks on other hosts can use it."""
    protocol, rest = server.target.split("://", 1)
    port = rest.rsplit(":", 1)[1]
    return "%s://%s:%s" % (protocol, network.outward_address(), port)


@contextlib.contextmanager
def tf_data_service(compute_config: TfDataServiceConfig, rank: int):
    """Yields the address of the dispatcher that training rank ``rank`` uses, once
    that dispatcher and all its workers registered.

    With ``dispatcher_side="training"`` the training ranks run the dispatchers (rank 0
    alone when there is one dispatcher) for as long as the context is open.

    ::

        with tf_data_service(config, hvd.rank()) as address:
            ds = ds.apply(tf.data.experimental.service.distribute(
                "distributed_epoch", address))
            model.fit(ds)
    """
    compute = compute_config.compute_client(verbose=2)
    dispatcher_server = None
    if compute_config.dispatcher_side == "training" and (
            compute_config.dispatchers > 1 or rank == 0):
        dispatcher_server = tf.data.experimental.service.DispatchServer()
        compute.register_dispatcher(rank, _reachable_target(dispatcher_server))
        logger.info("training rank %d runs dispatcher at %s", rank, dispatcher_server.target)
    try:
        dispatcher_id = rank if compute_config.dispatchers > 1 else 0
        address = compute.wait_for_dispatcher_registration(dispatcher_id, compute_config.timeout)
        compute.wait_for_dispatcher_worker_registration(dispatcher_id, compute_config.timeout)
        yield address
    finally:
        if dispatcher_server is not None:
            dispatcher_server.stop()


def send_to_data_service(dataset: tf.data.Dataset,
                         compute_config: TfDataServiceConfig,
                         rank: int,
                         size: Optional[int] = None,
                         reuse_dataset: bool = False,
                         round_robin: bool = False,
                         *, processing_mode: str = "distributed_epoch") -> tf.data.Dataset:
    """Moves ``dataset``'s processing to the compute job's tf.data workers.

    Everything before this call runs on the workers, everything after it locally.
    ``reuse_dataset``: all training ranks share one service job (named "job"), so in
    "distributed_epoch" mode each element reaches exactly one rank; otherwise every rank
    gets its own job (and the whole dataset). ``round_robin`` (with ``reuse_dataset``
    and ``size``) hands the ranks batches in lock step; the dataset must be infinite.

    ::

        ds = tf.data.Dataset.range(100).batch(10).send_to_data_service(
            config, hvd.rank(), hvd.size(), reuse_dataset=True)
    """
    if compute_config.dispatcher_side == "training":
        raise RuntimeError("training side dispatcher not supported by send_to_data_service, "
                           "use the tf_data_service context manager instead")
    if reuse_dataset and round_robin and size is None:
        raise ValueError("round_robin needs the number of training ranks: pass size")
    with tf_data_service(compute_config, rank) as dispatcher_address:
        shared = reuse_dataset
        lock_step = reuse_dataset and round_robin
        return dataset.apply(tf.data.experimental.service.distribute(
            processing_mode=processing_mode,
            service=dispatcher_address,
            job_name=SHARED_JOB_NAME if shared else None,
            consumer_index=rank if lock_step else None,
            num_consumers=size if lock_step else None))


# Horovod makes it a Dataset method: ds.send_to_data_service(config, rank, size).
tf.data.Dataset.send_to_data_service = send_to_data_service


def _free_port():
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def compute_worker_fn(compute_config: TfDataServiceConfig, timeout: Optional[int] = None):
    """Runs on every rank of the compute job: the first rank of each group of
    ``workers_per_dispatcher`` ranks starts a dispatcher (dispatcher_side "compute"),
    every rank a worker; then it serves until the compute service shuts down."""
    basics.init()
    index = topology.rank()
    per = compute_config.workers_per_dispatcher
    dispatcher_index = index // per
    compute = compute_config.compute_client(verbose=2)

    dispatcher_server = None
    if compute_config.dispatcher_side == "compute" and index % per == 0:
        dispatcher_server = tf.data.experimental.service.DispatchServer()
        compute.register_dispatcher(dispatcher_index, _reachable_target(dispatcher_server))
        logger.info("compute rank %d runs dispatcher %d at %s", index, dispatcher_index,
                    dispatcher_server.target)

    dispatcher_address = compute.wait_for_dispatcher_registration(
        dispatcher_index, compute_config.timeout)
    port = _free_port()
    worker_server = tf.data.experimental.service.WorkerServer(
        tf.data.experimental.service.WorkerConfig(
            dispatcher_address=dispatcher_address.split("://", 1)[1],
            worker_address="%s:%d" % (network.outward_address(), port),
            port=port,
            heartbeat_interval_ms=1000,
            dispatcher_timeout_ms=timeout * 1000 if timeout else None))
    compute.register_worker_for_dispatcher(dispatcher_index, index)
    logger.info("compute rank %d runs a worker for dispatcher %d", index, dispatcher_index)

    compute.wait_for_shutdown()
    worker_server.stop()
    if dispatcher_server is not None:
        dispatcher_server.stop()
    # Every rank has seen the shutdown before the service (on rank 0) goes away.
    ops.barrier()


__all__ = ["TfDataServiceConfig", "tf_data_service", "send_to_data_service",
           "compute_worker_fn"]

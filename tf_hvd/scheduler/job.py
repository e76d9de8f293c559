"""What a job that no tf_hvd launcher started looks like to one of its processes.

Each engine's mapping (tf_hvd.scheduler.engine_env for Slurm and torchrun's variables,
tf_hvd.scheduler.tf_config for TF_CONFIG and CLUSTER_SPEC) turns its environment into one
:class:`Job`, or raises :class:`SchedulerEnvError` saying why this process cannot join.

    >>> cross_of(["a", "a", "b"], 2)   # rank 2 is b's local rank 0; a and b run one
    (1, 2)
"""

import collections

from ..job import placement


class SchedulerEnvError(RuntimeError):
    """The environment says this process belongs to a job it cannot join."""


# ``meeting`` names where the job says rank 0 serves, in its engine's words (messages).
Job = collections.namedtuple("Job", [
    "engine", "rank", "size", "local_rank", "local_size", "cross_rank", "cross_size",
    "master_addr", "master_port", "host", "meeting"], defaults=("MASTER_ADDR:MASTER_PORT",))


def cross_of(hosts, rank):
    """(cross rank, cross size) of ``rank`` when rank r runs on ``hosts[r]``
    (job/placement.py's rule)."""
    return placement.topology_of(hosts, rank)[2:]

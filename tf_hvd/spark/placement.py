"""Which Spark task is which rank (pure Python: no pyspark, no TensorFlow).

Every task of the barrier stage tells the others where it runs (``allGather``): its
executor's address, host name, executor id and the GPUs Spark gave it. Tasks on the same
address get consecutive ranks (hosts in the order of their first task), so local and
cross ranks mean what they mean under tfhvdrun (tf_hvd/job/placement.py counts them).

    >>> tasks = [TaskPlace(0, "10.0.0.2", "h1", "0", ()), TaskPlace(1, "10.0.0.3", "h2", "1", ()),
    ...          TaskPlace(2, "10.0.0.2", "h1", "0", ())]
    >>> [(s.rank, s.local_rank, s.cross_rank) for s in ranks_of(tasks)]
    [(0, 0, 0), (2, 0, 1), (1, 1, 0)]
"""

import collections

from tf_hvd.job.placement import assign_ranks

# One task as it reports itself; ``partition`` is its index in the barrier stage.
TaskPlace = collections.namedtuple("TaskPlace",
                                   ["partition", "address", "hostname", "executor", "gpus"])
_Host = collections.namedtuple("_Host", ["name", "slots"])


def ranks_of(tasks):
    """placement.RankSlot per task, in the tasks' (partition) order; the slots' hostname
    is the executor's address."""
    order = []
    for task in tasks:
        if task.address not in order:
            order.append(task.address)
    by_rank = sorted(tasks, key=lambda t: (order.index(t.address), t.partition))
    slots = assign_ranks([_Host(a, sum(1 for t in tasks if t.address == a)) for a in order],
                         len(tasks))
    of_partition = {t.partition: slot for t, slot in zip(by_rank, slots)}
    return [of_partition[t.partition] for t in tasks]


def host_gpus(tasks, slots, partition):
    """The GPUs a rank sees: every GPU Spark gave the ranks on its host, ordered by local
    rank, so that ``hvd.local_rank()`` picks the one Spark gave this rank."""
    me = slots[[t.partition for t in tasks].index(partition)]
    mine = [(s.local_rank, t.gpus) for t, s in zip(tasks, slots) if s.hostname == me.hostname]
    ordered = []
    for _, gpus in sorted(mine):
        ordered.extend(g for g in gpus if g not in ordered)
    return ordered

"""Ranks for Ray actors: which actor gets which rank, and each rank's variables.

Actors on the same Ray node get consecutive ranks (nodes in the order their first actor
was placed), so local and cross ranks mean what they mean under tfhvdrun
(tf_hvd/job/placement.py computes them the same way).
"""

import collections

from tf_hvd.job.placement import assign_ranks
from tf_hvd.job.rank_env import RankEnv

# What RankWorker.node() returns for each actor.
NodeInfo = collections.namedtuple("NodeInfo", ["node_id", "ip", "hostname", "gpus"])
_Host = collections.namedtuple("_Host", ["name", "slots"])


def order_by_node(infos):
    """Indices of ``infos`` grouped by node (first-seen order); the result's i-th entry is
    the actor that gets rank i."""
    nodes = []
    for info in infos:
        if info.node_id not in nodes:
            nodes.append(info.node_id)
    return sorted(range(len(infos)), key=lambda i: (nodes.index(infos[i].node_id), i))


def rank_slots(infos_by_rank):
    """placement.RankSlot per rank; hosts named by node IP."""
    hosts = []
    for info in infos_by_rank:
        if hosts and hosts[-1].name == info.ip and hosts[-1].node_id == info.node_id:
            hosts[-1].slots += 1
        elif any(h.node_id == info.node_id for h in hosts):
            raise ValueError("actors of one node must have consecutive ranks")
        else:
            hosts.append(_Mutable(info.ip, info.node_id))
    return assign_ranks([_Host(h.name, h.slots) for h in hosts], len(infos_by_rank))


class _Mutable(object):
    def __init__(self, name, node_id):
        self.name, self.node_id, self.slots = name, node_id, 1


def rank_env_for(slot, info, rendezvous_addr, rendezvous_port, secret, knobs=None,
                 visible_gpus=None, **fields):
    """The variables actor ``info`` needs to be rank ``slot.rank`` of a Gloo job: its
    RankEnv (with ``fields``, e.g. elastic ids) as variables."""
    env = RankEnv.for_slot(slot, hostname=info.ip, rendezvous_addr=rendezvous_addr,
                           rendezvous_port=rendezvous_port, controller="gloo",
                           secret=secret, knobs=knobs or {}, **fields).to_environ()
    if visible_gpus:  # every local rank sees the node's GPUs: hvd.local_rank() picks one
        env["CUDA_VISIBLE_DEVICES"] = ",".join(visible_gpus)
    return env


def node_gpus(infos):
    """node id -> the sorted GPU ids of all actors on that node."""
    gpus = {}
    for info in infos:
        gpus.setdefault(info.node_id, set()).update(info.gpus)
    return {n: sorted(g, key=lambda x: (len(x), x)) for n, g in gpus.items()}

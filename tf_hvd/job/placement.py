"""Which rank runs where: the rank topology computed from the host list.

Ranks fill the hosts in order: with ``-H a:2,b:2 -np 3`` ranks 0 and 1 run on ``a``
and rank 2 on ``b``. For every rank we compute what Horovod exposes:

* ``local_rank`` / ``local_size``: position among, and number of, the ranks on the
  same host;
* ``cross_rank`` / ``cross_size``: position among, and number of, the hosts that run
  a rank with the same ``local_rank`` (hosts counted in host-list order).

Hosts that receive no rank (``-np`` smaller than the slot total) are dropped.
"""

import collections

RankSlot = collections.namedtuple(
    "RankSlot",
    ["rank", "size", "hostname", "local_rank", "local_size", "cross_rank", "cross_size"])


def cross_of_counts(per_host, host_index, local_rank):
    """(cross rank, cross size) as Horovod counts them: among the hosts that run a rank
    with this local rank; ``per_host`` is the number of ranks on each host, in order."""
    peers = [i for i, n in enumerate(per_host) if n > local_rank]
    return peers.index(host_index), len(peers)


def topology_of(hosts, rank):
    """(local rank, local size, cross rank, cross size) of ``rank`` when rank r runs on
    ``hosts[r]`` (hosts in the order of their first rank): the rule assign_ranks places
    by, for a job whose ranks are already placed (re-forming, schedulers).

        >>> topology_of(["a", "a", "b"], 2)   # b's local rank 0; a and b run one
        (0, 1, 1, 2)
    """
    order = list(dict.fromkeys(hosts))
    local_rank = hosts[:rank].count(hosts[rank])
    cross_rank, cross_size = cross_of_counts([hosts.count(h) for h in order],
                                             order.index(hosts[rank]), local_rank)
    return local_rank, hosts.count(hosts[rank]), cross_rank, cross_size


def assign_ranks(hosts, num_proc):
    """Return a list of RankSlot, index == rank.

    ``hosts`` is a list of HostSlots; ``num_proc`` must be between 1 and the total
    number of slots (the caller validates and reports).
    """
    if num_proc < 1:
        raise ValueError("num_proc must be at least 1")
    capacity = sum(h.slots for h in hosts)
    if num_proc > capacity:
        raise ValueError("num_proc %d exceeds the %d available slots" % (num_proc, capacity))

    # (hostname, number of ranks placed there), in host order.
    used = []
    remaining = num_proc
    for host in hosts:
        if remaining == 0:
            break
        n = min(host.slots, remaining)
        used.append((host.name, n))
        remaining -= n

    slots = []
    per_host = [n for _, n in used]
    for host_index, (name, n) in enumerate(used):
        for local_rank in range(n):
            cross_rank, cross_size = cross_of_counts(per_host, host_index, local_rank)
            slots.append(RankSlot(
                rank=len(slots), size=num_proc, hostname=name, local_rank=local_rank,
                local_size=n, cross_rank=cross_rank, cross_size=cross_size))
    return slots


def hosts_used(slots):
    """Distinct host names in first-use order."""
    seen = []
    for s in slots:
        if s.hostname not in seen:
            seen.append(s.hostname)
    return seen

"""Process sets: subsets of the job's processes that run collectives together.

As in Horovod, a collective given ``process_set=`` runs only among that set's
ranks, and different sets run their collectives concurrently: each set is
negotiated on its own (its own tensor names, coordinator, fusion and cache), so
a set whose members wait for a tensor never holds up another set::

    even = hvd.ProcessSet([0, 2])
    odd = hvd.ProcessSet([1, 3])
    hvd.init(process_sets=[even, odd])          # the same list on every rank
    my_set = even if hvd.rank() % 2 == 0 else odd
    total = hvd.allreduce(x, op=hvd.Sum, process_set=my_set)   # over 2 ranks

    # With HOROVOD_DYNAMIC_PROCESS_SETS=1 (or hvd.init(process_sets="dynamic")),
    # every rank adds and removes sets together, in the same order:
    pair = hvd.add_process_set([0, 1])
    hvd.remove_process_set(pair)

Ranks are global ranks (``hvd.rank()``) throughout, also ``root_rank`` of a
broadcast; ``ProcessSet.rank()`` is a process's position within the set, the
order of ``allgather`` results. A process that is not a member gets
``tf.errors.InvalidArgumentError`` (``"Allreduce: Rank 1 is not a member of the
provided process set ..."``) from a collective on the set.
"""

import os

from tf_hvd._library import lib as _lib
from tf_hvd.topology import check_initialized


def _is_iterable(x):
    try:
        iter(x)
    except TypeError:
        return False
    return True


class ProcessSet(object):
    """A set of Horovod processes that run collectives together.

    Build it from a list of global ranks (or, under MPI, an mpi4py
    communicator), then pass it to ``hvd.init(process_sets=[...])`` or
    ``hvd.add_process_set()``; ``process_set_id`` is set once it is
    registered (None before, and after removal).

    Example::

        ps = hvd.ProcessSet([0, 2])
        hvd.init(process_sets=[ps])
        ps.process_set_id, ps.size(), ps.included()    # 1, 2, rank() in (0, 2)
    """

    process_set_id = None
    ranks = None
    mpi_comm = None

    def __init__(self, ranks_or_comm):
        if _is_iterable(ranks_or_comm):
            ranks = sorted(ranks_or_comm)
            if any(not isinstance(r, int) or isinstance(r, bool) for r in ranks):
                raise ValueError("ProcessSet should be initialized with a list of process ranks "
                                 "or an mpi4py Comm object")
            self.ranks = ranks
            return
        try:
            from mpi4py import MPI
        except ImportError:
            MPI = None
        if MPI is None or not isinstance(ranks_or_comm, MPI.Comm):
            raise ValueError("ProcessSet should be initialized with a list of process ranks "
                             "or an mpi4py Comm object")
        self.mpi_comm = ranks_or_comm

    def _invalidate(self):
        self.process_set_id = None

    def size(self):
        """Number of processes in the set, or None if it is not registered."""
        if self.process_set_id is None:
            return None
        sets = _lib.process_sets()
        if self.process_set_id not in sets:
            raise ValueError("Process set does not exist or has not been registered.")
        return len(sets[self.process_set_id])

    def rank(self):
        """This process's position in the set (the order of allgather results),
        or None if the set is not registered. Collectives still take global
        ranks (e.g. broadcast's root_rank)."""
        if self.process_set_id is None:
            return None
        topology = _lib.process_set_topology(self.process_set_id)
        if topology is None:
            raise ValueError("Process is not part of provided process set.")
        return topology[0]

    def included(self):
        """Whether this process is a member, or None if the ranks are not known yet."""
        if self.ranks is None:
            return None
        return int(_lib.rank()) in self.ranks

    def __str__(self):
        return "ProcessSet(process_set_id=%s, ranks=%s, mpi_comm=%s)" % (
            self.process_set_id, self.ranks, self.mpi_comm)

    __repr__ = __str__


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0


def job_communicator(comm):
    """hvd.init's ``comm`` as (MPI_COMM_WORLD ranks, Fortran handle or None,
    the mpi4py communicator of the job or None)."""
    if comm is None:
        global_process_set.mpi_comm = None
        return [], None, None
    if _is_iterable(comm):
        ranks = list(comm)
        if any(not isinstance(r, int) or isinstance(r, bool) for r in ranks):
            raise ValueError("Invalid type of argument comm. Expected list of rank integers or "
                             "mpi4py.MPI.Comm object.")
        return ranks, None, None
    try:
        from mpi4py import MPI
    except ImportError:
        MPI = None
    if MPI is None or not isinstance(comm, MPI.Comm):
        raise ValueError("Invalid type of argument comm. Expected list of rank integers or "
                         "mpi4py.MPI.Comm object.")
    global_process_set.mpi_comm = comm
    return [], int(comm.py2f()), comm


def _comm_job_ranks(comm, base, comm_ranks):
    """The job ranks of the members of ``comm`` (an mpi4py communicator): ranks
    in ``base`` (the job's communicator), or positions in ``comm_ranks`` (the
    job's MPI_COMM_WORLD ranks), or MPI_COMM_WORLD ranks."""
    from mpi4py import MPI
    members = list(range(comm.Get_size()))
    if base is not None:
        return sorted(comm.Get_group().Translate_ranks(members, base.Get_group()))
    world = comm.Get_group().Translate_ranks(members, MPI.COMM_WORLD.Get_group())
    if comm_ranks:
        return sorted(comm_ranks.index(w) for w in world)
    return sorted(world)


def split_init_sets(process_sets, base=None, comm_ranks=()):
    """Returns (process sets as given, lists of ranks for the core); sets made
    from an mpi4py communicator get their ranks here."""
    if process_sets is None:
        return [], []
    if isinstance(process_sets, str):
        if process_sets.lower() != "dynamic":
            raise ValueError("process_sets must be a list of hvd.ProcessSet or \"dynamic\", "
                             "got %r" % (process_sets,))
        os.environ["HOROVOD_DYNAMIC_PROCESS_SETS"] = "1"
        return [], []
    sets = list(process_sets)
    for ps in sets:
        if not isinstance(ps, ProcessSet):
            raise ValueError("process_sets must be a list of hvd.ProcessSet, got %r" % (ps,))
        if ps.ranks is None and ps.mpi_comm is not None:
            ps.ranks = _comm_job_ranks(ps.mpi_comm, base, list(comm_ranks))
    return sets, [list(ps.ranks) for ps in sets]


def register_init_sets(sets):
    """After the core started: gives each set object its id; a duplicate
    (same ranks as an earlier entry or as the global set) raises ValueError as
    in Horovod."""
    registered = _lib.process_sets()
    by_ranks = dict((tuple(ranks), set_id) for set_id, ranks in registered.items())
    global_process_set.ranks = list(registered[0])
    seen = {0}
    for index, ps in enumerate(sets):
        set_id = by_ranks.get(tuple(ps.ranks)) if ps.ranks else 0
        if set_id is None or set_id in seen:
            ps._invalidate()
            raise ValueError("Horovod could not be initialized because process_sets entry "
                             "number %d is a duplicate: %s" % (index, ps))
        ps.process_set_id = set_id
        seen.add(set_id)


def add_process_set(process_set):
    """Adds a process set after ``hvd.init()`` and returns it, registered.

    Needs HOROVOD_DYNAMIC_PROCESS_SETS=1 (or ``hvd.init(process_sets="dynamic")``).
    Every process calls it with the same ranks, in the same order as its other
    add/remove calls, also processes outside the set. ``process_set``: a
    ProcessSet or a list of ranks. A set of the same ranks must not exist.

    Example::

        ps = hvd.add_process_set([0, 1])
        hvd.allreduce(x, process_set=ps)      # on ranks 0 and 1
    """
    check_initialized()
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.ranks is None and process_set.mpi_comm is not None:
        raise NotImplementedError(
            "Dynamically adding process sets defined by an MPI communicator is not "
            "implemented. Please build the process set via a list of ranks.")
    set_id = _lib.add_process_set(list(process_set.ranks))
    if set_id < 0:
        raise ValueError("Attempted to add a duplicate process set: %s" % (process_set,))
    process_set.process_set_id = int(set_id)
    return process_set


def remove_process_set(process_set):
    """Removes a process set added before; returns whether it was removed.

    Needs HOROVOD_DYNAMIC_PROCESS_SETS=1; every process calls it, in the same
    order. The global set is never removed (False). Collectives still pending
    on the set fail with ``tf.errors.AbortedError``. The object becomes
    unregistered (``process_set_id`` None).
    """
    check_initialized()
    set_id = process_set.process_set_id
    if set_id is None or set_id == 0:
        return False
    process_set._invalidate()
    return bool(_lib.remove_process_set(int(set_id)))


def registered_set_id(process_set):
    """The id a collective's ``process_set=`` argument stands for (None: 0)."""
    if process_set is None:
        return 0
    if isinstance(process_set, ProcessSet):
        if process_set.process_set_id is None:
            raise ValueError(
                "%s is not registered: pass it to hvd.init(process_sets=[...]) or "
                "hvd.add_process_set() first (a removed set cannot be used)" % (process_set,))
        set_id = int(process_set.process_set_id)
        if set_id != 0 and _lib.is_initialized():
            # An id the core does not know raises ValueError now, when the op is
            # built (as in Horovod), rather than an error when it runs.
            _lib.process_set_topology(set_id)
        return set_id
    raise ValueError("process_set must be an hvd.ProcessSet, got %r" % (process_set,))


def set_rank_size(process_set_id):
    """(rank within the set, set size) of this process; the global ones for 0."""
    if process_set_id == 0:
        return int(_lib.rank()), int(_lib.size())
    topology = _lib.process_set_topology(int(process_set_id))
    if topology is None:
        raise ValueError("Process is not part of provided process set.")
    return int(topology[0]), int(topology[1])


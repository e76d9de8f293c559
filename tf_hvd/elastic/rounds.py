"""Moving this process into the job's next form: shut the core down, agree on the
round's members (reform.py), set the new rank's variables and initialise again.

    rounds.reset()                # after a lost rank or added hosts (run_loop.py)
    rounds.join_before_init()     # hvd.init() of a process started to join
    rounds.after_sync(state)      # the committed state reached this process
"""

import os

from tf_hvd import functions, topology
from tf_hvd._library import lib
from tf_hvd.elastic import store
from tf_hvd.elastic.reform import reform
from tf_hvd.job import placement, rank_env
from tf_hvd.job.elastic_state import COMMIT_KEY, JOINED_KEY, ROUND_KEY, SYNCED_KEY


def init_round(my_id, round_, announce=False):
    """Set this process's rank/size for ``round_`` and initialise the core."""
    rank, hosts = reform(my_id, round_, announce)
    version = store.hosts_version()  # a joiner announces itself before the round is decided
    local_rank, local_size, cross_rank, cross_size = placement.topology_of(hosts, rank)
    os.environ.update(rank_env.RankEnv(
        rank=rank, size=len(hosts), local_rank=local_rank, local_size=local_size,
        cross_rank=cross_rank, cross_size=cross_size,
        knobs={store.ROUND_ENV: str(round_)}).to_environ())
    store.seen["hosts_version"] = version
    store.seen["round"] = round_
    lib.init()
    # As under horovodrun, HOROVOD_RANK stays the rank the launcher started this process
    # with (Horovod's elastic scripts read it as their start rank); hvd.rank() is the
    # rank in the job's current form.
    os.environ.update(rank_env.RankEnv(rank=my_id).to_environ())


def join_before_init():
    """For a process the launcher started to join a running job (hvd.init() calls this):
    meet the others in the next round instead of the job's first rendezvous."""
    my_id = rank_env.RankEnv.from_environ(os.environ).elastic_id
    del os.environ[store.JOIN_ENV]
    store.seen["holds"] = False  # until the committed state reaches it (run's first sync)
    with store.client() as s:
        s.put(JOINED_KEY % my_id, b"1")  # the launcher stops waiting for it
        current = s.get(ROUND_KEY)
    init_round(my_id, (int(current.decode()) if current else 0) + 1, announce=True)


def after_sync(state):
    """The committed state has reached this process (``state.sync()`` succeeded): carry
    the commit count from rank 0 and tell the launcher this process now holds it."""
    if not store.elastic_launcher():
        return
    count = functions.broadcast_object(getattr(state, "_tf_hvd_commits", 0), 0,
                                       session=getattr(state, "session", None),
                                       name="elastic.commits")
    state._tf_hvd_commits = count
    first = not store.seen["holds"]
    store.seen["holds"] = True
    if first or topology.rank() == 0:
        my_id = int(os.environ.get(store.ID_ENV, topology.rank()))
        with store.client() as s:
            s.put(SYNCED_KEY % my_id, str(count).encode())
            if topology.rank() == 0:
                s.put(COMMIT_KEY, str(count).encode())


def reset():
    """Shut the core down and initialise again among the processes that are left (and
    any that join)."""
    my_id = int(os.environ.setdefault(store.ID_ENV, str(topology.rank())))
    lib.shutdown()
    init_round(my_id, store.seen["round"] + 1)

"""Elastic training with Horovod's API: when a rank is lost, the others roll back to
their last commit, form a smaller job among themselves and go on.

    import tf_hvd as hvd

    hvd.init()
    state = hvd.elastic.TensorFlowKerasState(model, optimizer, batch=0, epoch=0)

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            for state.batch in range(state.batch, batches):
                step(...)
                state.commit()
            state.batch = 0

    train(state)

Run it with ``tfhvdrun -np 4 --min-np 2 python train.py``: a rank that fails no longer
ends the job while at least --min-np ranks are left. The survivors' next collective fails
(HorovodInternalError); ``run`` restores the state from the last ``commit()``, shuts the
core down, agrees with the other survivors (through the launcher's rendezvous store) on
who is left, initialises again as a job of that size (ranks renumbered in the old order),
broadcasts the state from the new rank 0 and calls the function again.

With --host-discovery-script the launcher starts ranks on the slots the script adds
(localhost for now, up to --max-np); ``commit()`` (through ``check_host_updates()``) then
raises HostsUpdatedInterrupt on every rank, and ``run`` re-forms the job with them. A host
where a rank failed gets no new rank for the rest of the job, or until its
--blacklist-cooldown-range cooldown ends. Keras: tf_hvd.keras.elastic.
"""

import copy
import os
import socket
import time

import numpy as np
import tensorflow as tf

from tf_hvd import functions, ops, topology
from tf_hvd._keras import flavors
from tf_hvd._keras.sharded_state.protocol import holders as _sharded_state_holders
from tf_hvd._library import lib as _lib
from tf_hvd.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from tf_hvd.reduce_ops import Max
from tf_hvd.sharded_rows import holds_sharded_state, is_sharded_rows
from tf_hvd.job import placement
from tf_hvd.job import rank_env
from tf_hvd.job.elastic_state import (COMMIT_KEY, HOSTS_VERSION_KEY, IDS_KEY, JOINED_KEY,
                                      JOINING_KEY, LEAVING_KEY, ROUND_KEY, SYNCED_KEY,
                                      parse_ids, round_key)
from tf_hvd.job.rendezvous import RendezvousClient

__all__ = ["run", "State", "ObjectState", "TensorFlowState", "TensorFlowKerasState",
           "HorovodInternalError", "HostsUpdatedInterrupt"]

# Errors of a collective whose job lost a rank (the core names the rank).
_LOST_RANK_ERRORS = (HorovodInternalError, tf.errors.UnavailableError, tf.errors.AbortedError,
                     tf.errors.DeadlineExceededError)
SETTLE_SECONDS = 1.0  # survivors wait this long without a newcomer before forming the job
# ...and, while the launcher still lists a process that has not come to the round, this
# long: the launcher lists a failed process until it sees it exit, and only then stops
# the other ranks of its (blacklisted) host; deciding before that would form the round
# with processes about to be stopped. A listed process that never comes (it hangs) is
# left out after this.
LISTED_WAIT_SECONDS = 30.0
ROUND_ENV = "HOROVOD_ELASTIC_ROUND"   # the round of the job's current form (knob)
ID_ENV = rank_env.ELASTIC_ID          # this process's id: its rank when the launcher started it
JOIN_ENV = rank_env.ELASTIC_JOIN      # "1": started by the launcher to join a running job
HOST_ENV = rank_env.ELASTIC_HOST      # the host the launcher started this process on
# A reset that waits for a newcomer the launcher started waits until the launcher drops
# it (it does so --elastic-timeout after starting it); this much longer at most.
JOINING_GRACE_SECONDS = 30.0
# holds: this process has the job's committed state (a newcomer once it has synced)
_seen = {"hosts_version": None, "round": 0, "holds": True}


class State(object):
    """What a job rolls back to: ``commit()`` saves it, ``restore()`` returns to the last
    save, ``sync()`` copies rank 0's to every rank."""

    def __init__(self):
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        self.save()
        self._tf_hvd_commits = getattr(self, "_tf_hvd_commits", 0) + 1
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt on every rank (they agree through an allreduce)
        when the launcher has started ranks on hosts its discovery script added."""
        if not _elastic_launcher():
            return  # not started by an elastic launcher (tfhvdrun --min-np)
        # rank 0 tells the launcher how far the job got (named should the state be lost)
        commits = getattr(self, "_tf_hvd_commits", None) if topology.rank() == 0 else None
        changed = _hosts_version(commits) != _seen["hosts_version"]
        agreed = ops.allreduce(tf.constant(int(changed)), op=Max,
                               name="elastic.check_host_updates")
        if int(agreed.numpy()):
            raise HostsUpdatedInterrupt(skip_sync=False)

    def save(self):
        raise NotImplementedError

    def restore(self):
        raise NotImplementedError

    def sync(self):
        raise NotImplementedError


class ObjectState(State):
    """Plain Python attributes (``ObjectState(epoch=0, batch=0)``; ``state.epoch``)."""

    def __init__(self, bcast_object=None, **kwargs):
        State.__init__(self)
        self._bcast_object = bcast_object or functions.broadcast_object
        self._names = sorted(kwargs)
        for name, value in kwargs.items():
            setattr(self, name, value)
        self._saved = {}
        ObjectState.save(self)

    def save(self):
        self._saved = {n: copy.deepcopy(getattr(self, n)) for n in self._names}

    def restore(self):
        for name, value in self._saved.items():
            setattr(self, name, copy.deepcopy(value))

    def sync(self):
        if self._names:
            values = self._bcast_object({n: getattr(self, n) for n in self._names}, 0)
            for name, value in values.items():
                setattr(self, name, value)
            ObjectState.save(self)


class TensorFlowState(ObjectState):
    """TensorFlow variables (kept as copies at each commit) plus Python attributes.

    Eagerly the variables are read and assigned directly. For TF1 (graph mode), as in
    Horovod, ``variables`` defaults to the global variables and ``session`` to the
    default session; the values are read and loaded through the session::

        state = hvd.elastic.TensorFlowState(session=session, epoch=0)
    """

    def __init__(self, variables=None, session=None, **kwargs):
        graph_mode = not tf.executing_eagerly()
        if variables is None and graph_mode:
            variables = tf.compat.v1.global_variables()
        self.variables = list(variables or [])
        self.session = session
        if session is None and graph_mode:
            self.session = tf.compat.v1.get_default_session()
        # TF1: the broadcast op is built once, here (hvd.init() has run).
        self._bcast_op = (functions.broadcast_variables(self.variables, root_rank=0)
                          if self.session is not None and self.variables else None)
        self._saved_values = []
        ObjectState.__init__(self, **kwargs)
        TensorFlowState.save(self)

    def _state_variables(self):
        """The variables to save, restore and sync (subclasses may find them anew each
        time: a Keras optimizer creates its variables at its first step)."""
        return self.variables

    def save(self):
        ObjectState.save(self)
        variables = self._state_variables()
        if self.session is not None:
            values = self.session.run(variables) if variables else []
            self._saved_values = [(v, np.copy(x)) for v, x in zip(variables, values)]
        else:
            self._saved_values = [(v, v.numpy().copy()) for v in variables]

    def restore(self):
        ObjectState.restore(self)
        for v, value in self._saved_values:
            if self.session is not None:
                v.load(value, self.session)
            else:
                v.assign(value)

    def sync(self):
        variables = self._state_variables()
        if self._bcast_op is not None:
            self.session.run(self._bcast_op)
        elif variables:
            functions.broadcast_variables(variables, root_rank=0)
        ObjectState.sync(self)
        TensorFlowState.save(self)


class TensorFlowKerasState(TensorFlowState):
    """A Keras model and its optimizer (their variables, the optimizer's as soon as it
    has created them) plus Python attributes. ``optimizer`` defaults to the model's.
    After a reset the model's compiled functions are dropped, so that the next fit
    traces them again for the new number of ranks.

    Sharded state (a sharded DistributedOptimizer's slots, DistributedEmbedding
    tables) is kept in a form that does not depend on the number of ranks, through the
    one protocol every holder of it offers (tf_hvd._keras.sharded_state.protocol): a
    commit gathers each holder's whole state (what one process would hold) onto every
    rank, restore gives each rank its part of it again, and after the job re-forms at
    another size ``sync`` lays every holder out over the new ranks and gives each rank
    its part of rank 0's copy::

        opt = hvd.DistributedOptimizer(keras.optimizers.Adam(1e-3), sharded=True)
        model.compile(optimizer=opt, loss="mse")
        state = hvd.elastic.TensorFlowKerasState(model, epoch=0)
        state.commit()        # every rank: allgathers the slots, keeps the whole state
    """

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        self.model = model
        self.optimizer = optimizer
        self.backend = backend  # accepted as in Horovod; tf_hvd does not need it
        self._whole = []        # each holder's whole state at the last save (or None)
        TensorFlowState.__init__(self, [], **kwargs)
        # A process that joined a running job gathers nothing here (the others are in
        # sync, not here): it takes rank 0's state at its first sync.
        self._whole = self._gather_whole() if _seen["holds"] else []

    def _optimizer(self):
        return self.optimizer if self.optimizer is not None else \
            getattr(self.model, "optimizer", None)

    def _holders(self):
        """The holders of sharded state: the model's layers, then the optimizer."""
        return _sharded_state_holders(self.model, self._optimizer())

    def _gather_whole(self):
        """Each holder's whole state on every rank (a collective), None for a holder
        whose state does not exist yet."""
        return [h.gather_whole(None) if h.sharded_state_exists() else None
                for h in self._holders()]

    def _saved_whole(self, count):
        return list(self._whole) + [None] * (count - len(self._whole))

    def save(self):
        gathered = self._gather_whole()  # first: should it fail, the last save stays whole
        TensorFlowState.save(self)
        self._whole = gathered

    def restore(self):
        TensorFlowState.restore(self)
        holders = self._holders()
        for holder, whole in zip(holders, self._saved_whole(len(holders))):
            if whole is not None and holder.sharded_state_exists():
                holder.load_whole(whole)  # this rank's part, in its current layout

    def _state_variables(self):
        # sharded state travels whole, by save/restore/sync's holders
        variables = [v for v in self.model.weights if not is_sharded_rows(v)]
        opt = self._optimizer()
        if holds_sharded_state(opt):
            return variables
        if opt is not None and not isinstance(opt, str) and flavors.optimizer_built(opt):
            variables += [v for v in flavors.optimizer_variables(opt)
                          if not any(v is w for w in variables)]
        return variables

    def _build_optimizer(self):
        """Create the optimizer's variables now, so that a rank that has not trained
        yet (one that joins) syncs the same variables as those that have."""
        opt = self._optimizer()
        if opt is None or isinstance(opt, str) or flavors.optimizer_built(opt):
            return
        trainable = list(self.model.trainable_variables)
        if not trainable:
            return
        if flavors.optimizer_kind(opt) == flavors.TF_KERAS_LEGACY:
            opt._create_all_weights(trainable)
        else:
            opt.build(trainable)

    def sync(self):
        # Every rank lays each holder out for the ranks as they are now, in the same
        # order (their collectives meet); one that had no state (it joined) makes it.
        holders = self._holders()
        for holder in holders:
            holder.lay_out(self.model)
        self._build_optimizer()   # an unsharded optimizer's variables, to broadcast
        TensorFlowState.sync(self)
        if not holders:
            return
        held = functions.broadcast_object(
            [w is not None for w in self._saved_whole(len(holders))], 0,
            name="elastic.sharded_state")
        whole = []
        for holder, saved, has in zip(holders, self._saved_whole(len(holders)), held):
            if has:   # rank 0's last save, each rank taking its part
                whole.append(holder.load_whole(saved, root_rank=0))
            else:     # saved before the state existed: its fresh state is the state
                whole.append(holder.gather_whole(None))
        self._whole = whole

    def on_reset(self):
        for name in ("train_function", "test_function", "predict_function"):
            if getattr(self.model, name, None) is not None:
                setattr(self.model, name, None)
        TensorFlowState.on_reset(self)


def _client():
    return RendezvousClient.from_env(os.environ, timeout=10)


def _hosts_version(commits=None):
    with _client() as store:
        if commits is not None:
            store.put(COMMIT_KEY, str(commits).encode())
        value = store.get(HOSTS_VERSION_KEY)
    return value.decode() if value is not None else None


def _elastic_launcher():
    """Whether an elastic launcher (tfhvdrun --min-np, Ray's elastic executor) started
    this process: it then reads the launcher's store at commits and re-forms."""
    return rank_env.RankEnv.from_environ(os.environ).elastic_min_np is not None


def _ids(store):
    return parse_ids(store.get(IDS_KEY))  # the launcher publishes every process's id


def _reform(my_id, round_, announce=False):
    """Agree with the other processes of round ``round_`` on who takes part; return
    (rank, size): ranks in the order of the processes' ids."""
    launched = rank_env.RankEnv.from_environ(os.environ)
    timeout = 600.0 if launched.elastic_timeout is None else launched.elastic_timeout
    entered = time.monotonic()
    min_np = launched.elastic_min_np or 1
    with _client() as store:
        # the value is this process's host: the new topology groups ranks by it
        if _seen["holds"]:
            store.put(round_key(round_, "holds/%d" % my_id), b"1")
        store.put(round_key(round_, "alive/%d" % my_id), _my_host().encode())
        if announce:  # the running ranks see this at their next commit and come here
            store.put(HOSTS_VERSION_KEY, ("joined %d" % my_id).encode())
        # Listed when this process came: the ones worth waiting for (a joiner the
        # launcher starts later meets the job at its next commit, as before).
        listed_on_entry = set(_ids(store))
        if store.get(LEAVING_KEY % my_id) is not None:
            _leave(my_id)
        alive, stable_since = None, time.monotonic()
        while True:
            decided = store.get(round_key(round_, "members"))
            if decided is not None:
                if decided.startswith(b"lost"):
                    raise HorovodInternalError(_lost_message(decided, round_))
                members = [int(r) for r in decided.decode().split(",")]
                break
            listed = _ids(store)
            now_alive = [i for i in listed if store.get(round_key(round_, "alive/%d" % i))]
            if now_alive != alive:
                alive, stable_since = now_alive, time.monotonic()
            stable = time.monotonic() - stable_since
            missing = [i for i in listed if i in listed_on_entry and i not in alive]
            # Newcomers are waited for until the launcher drops them (it does so
            # --elastic-timeout after starting one that has not come): the committed
            # state must reach them before anything else changes.
            joining = _joining(store)
            if (stable >= SETTLE_SECONDS and alive and alive[0] == my_id
                    and len(alive) >= min_np
                    and (not missing or (stable >= LISTED_WAIT_SECONDS and
                                         not [i for i in missing if i in joining]))):
                if not [i for i in alive if store.get(round_key(round_, "holds/%d" % i))]:
                    # Every process that held the committed state is gone: forming a job
                    # of newcomers would start over from nothing.
                    verdict = ("lost %s" % (store.get(COMMIT_KEY) or b"0").decode()).encode()
                    store.put(round_key(round_, "members"), verdict)
                    raise HorovodInternalError(_lost_message(verdict, round_))
                # The first process decides (the members key is the round's verdict).
                store.put(round_key(round_, "members"), ",".join(str(i) for i in alive).encode())
                store.put(ROUND_KEY, str(round_).encode())
                members = alive
                break
            waited_for = [i for i in missing if i in joining]
            limit = timeout + (JOINING_GRACE_SECONDS if waited_for else 0.0)
            if time.monotonic() - entered > limit:
                raise HorovodInternalError("elastic reset: the job did not re-form within "
                                           "--elastic-timeout")
            time.sleep(0.1)
        hosts = [(store.get(round_key(round_, "alive/%d" % i)) or b"?").decode()
                 for i in members]
    if my_id not in members:
        with _client() as store:
            leaving = store.get(LEAVING_KEY % my_id)
        if leaving is not None:
            _leave(my_id)
        raise HorovodInternalError("elastic reset: this process (id %d) reached round %d "
                                   "after the others had formed it without it"
                                   % (my_id, round_))
    return members.index(my_id), hosts


def _leave(my_id):
    """The launcher no longer lists this process (its host left the discovered hosts):
    the others have its last commit; it ends here, as a Horovod worker whose host was
    removed does."""
    print("tf_hvd.elastic: the launcher removed this process (id %d) from the job; the "
          "others go on with its last commit" % my_id, flush=True)
    raise SystemExit(0)


def _joining(store):
    return parse_ids(store.get(JOINING_KEY))


def _lost_message(verdict, round_):
    return ("elastic reset: the job's committed state was lost: every process that held it "
            "is gone (last commit %s) and the processes left, which joined later, never "
            "received it; not starting over from nothing (round %d)"
            % (verdict.decode().split(" ", 1)[-1], round_))


def _my_host():
    return rank_env.RankEnv.from_environ(os.environ).elastic_host or socket.gethostname()


def _init_round(my_id, round_, announce=False):
    """Set this process's rank/size for ``round_`` and initialise the core."""
    rank, hosts = _reform(my_id, round_, announce)
    version = _hosts_version()  # a joiner announces itself before the round is decided
    local_rank, local_size, cross_rank, cross_size = placement.topology_of(hosts, rank)
    os.environ.update(rank_env.RankEnv(
        rank=rank, size=len(hosts), local_rank=local_rank, local_size=local_size,
        cross_rank=cross_rank, cross_size=cross_size,
        knobs={ROUND_ENV: str(round_)}).to_environ())
    _seen["hosts_version"] = version
    _seen["round"] = round_
    _lib.init()
    # As under horovodrun, HOROVOD_RANK stays the rank the launcher started this process
    # with (Horovod's elastic scripts read it as their start rank); hvd.rank() is the
    # rank in the job's current form.
    os.environ.update(rank_env.RankEnv(rank=my_id).to_environ())


def join_before_init():
    """For a process the launcher started to join a running job (hvd.init() calls this):
    meet the others in the next round instead of the job's first rendezvous."""
    my_id = rank_env.RankEnv.from_environ(os.environ).elastic_id
    del os.environ[JOIN_ENV]
    _seen["holds"] = False  # until the committed state reaches it (run's first sync)
    with _client() as store:
        store.put(JOINED_KEY % my_id, b"1")  # the launcher stops waiting for it
        current = store.get(ROUND_KEY)
    _init_round(my_id, (int(current.decode()) if current else 0) + 1, announce=True)


def _after_sync(state):
    """The committed state has reached this process (``state.sync()`` succeeded): carry
    the commit count from rank 0 and tell the launcher this process now holds it."""
    if not _elastic_launcher():
        return
    count = functions.broadcast_object(getattr(state, "_tf_hvd_commits", 0), 0,
                                       session=getattr(state, "session", None),
                                       name="elastic.commits")
    state._tf_hvd_commits = count
    first = not _seen["holds"]
    _seen["holds"] = True
    if first or topology.rank() == 0:
        my_id = int(os.environ.get(ID_ENV, topology.rank()))
        with _client() as store:
            store.put(SYNCED_KEY % my_id, str(count).encode())
            if topology.rank() == 0:
                store.put(COMMIT_KEY, str(count).encode())


def _reset():
    """Shut the core down and initialise again among the processes that are left (and
    any that join)."""
    my_id = int(os.environ.setdefault(ID_ENV, str(topology.rank())))
    _lib.shutdown()
    _init_round(my_id, _seen["round"] + 1)


def _cause(error):
    """The line of a failed collective's error that names the lost rank (TensorFlow
    puts its own lines around the core's message)."""
    lines = [l.strip() for l in str(error).splitlines() if l.strip()]
    naming = [l for l in lines if "rank" in l and not l.startswith(("File ", "[[", "Detected"))]
    return ((naming or lines or [type(error).__name__])[0])[:300]


def run(func):
    """Decorator: runs ``func(state, ...)``, and after a lost rank rolls ``state`` back to
    its last commit, re-forms the job with the ranks left and runs ``func`` again."""
    def wrapper(state, *args, **kwargs):
        resets = 0
        while True:
            state.sync()
            _after_sync(state)
            try:
                return func(state, *args, **kwargs)
            except _LOST_RANK_ERRORS as e:
                resets += 1
                print("tf_hvd.elastic: a collective failed (%s); rolling back to the last "
                      "commit and re-forming the job (reset %d)"
                      % (_cause(e), resets), flush=True)
                state.restore()
                _reset()
                state.on_reset()
            except HostsUpdatedInterrupt:
                _reset()
                state.on_reset()
    wrapper.__name__ = getattr(func, "__name__", "wrapper")
    wrapper.__doc__ = func.__doc__
    return wrapper

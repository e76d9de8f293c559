"""Elastic training with Horovod's API: when a rank is lost, the others roll back to
their last commit, form a smaller job among themselves and go on.

    import tf_hvd as hvd
    import tf_hvd.elastic

    hvd.init()
    state = tf_hvd.elastic.TensorFlowKerasState(model, optimizer, batch=0, epoch=0)

    @tf_hvd.elastic.run
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

Not available yet: ranks that join (--host-discovery-script, HostsUpdatedInterrupt); here
``check_host_updates()`` never interrupts.
"""

import copy
import os
import time

import tensorflow as tf

from tf_hvd import basics
from tf_hvd import functions
from tf_hvd.exceptions import HorovodInternalError, HostsUpdatedInterrupt

__all__ = ["run", "State", "ObjectState", "TensorFlowState", "TensorFlowKerasState",
           "HorovodInternalError", "HostsUpdatedInterrupt"]

# Errors of a collective whose job lost a rank (the core names the rank).
_LOST_RANK_ERRORS = (HorovodInternalError, tf.errors.UnavailableError, tf.errors.AbortedError,
                     tf.errors.DeadlineExceededError)
SETTLE_SECONDS = 1.0  # survivors wait this long without a newcomer before forming the job
ROUND_ENV = "TF_HVD_ELASTIC_ROUND"


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
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt when hosts joined or left (never, for now)."""

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
    """TensorFlow variables (kept as copies at each commit) plus Python attributes."""

    def __init__(self, variables=None, **kwargs):
        self.variables = list(variables or [])
        self._saved_values = []
        ObjectState.__init__(self, **kwargs)
        TensorFlowState.save(self)

    def save(self):
        ObjectState.save(self)
        self._saved_values = [v.numpy().copy() for v in self.variables]

    def restore(self):
        ObjectState.restore(self)
        for v, value in zip(self.variables, self._saved_values):
            v.assign(value)

    def sync(self):
        if self.variables:
            functions.broadcast_variables(self.variables, root_rank=0)
        ObjectState.sync(self)
        TensorFlowState.save(self)


class TensorFlowKerasState(TensorFlowState):
    """A Keras model and optimizer (their variables) plus Python attributes."""

    def __init__(self, model, optimizer=None, **kwargs):
        self.model = model
        self.optimizer = optimizer
        variables = list(model.variables)
        if optimizer is not None:
            variables += [v for v in getattr(optimizer, "variables", [])
                          if not any(v is w for w in variables)]
        TensorFlowState.__init__(self, variables, **kwargs)


def _client():
    from tf_hvd.runner.rendezvous import RendezvousClient
    return RendezvousClient.from_env(os.environ, timeout=10)


def _reform(old_rank, old_size):
    """Agree with the other survivors on who is left; return (new rank, new size)."""
    round_ = int(os.environ.get(ROUND_ENV, "0")) + 1
    prefix = "tf_hvd/elastic/round%d/" % round_
    with _client() as store:
        store.put(prefix + "alive/%d" % old_rank, b"1")
        members_key = prefix + "members"
        alive, stable_since = None, time.monotonic()
        deadline = time.monotonic() + float(os.environ.get("TF_HVD_ELASTIC_TIMEOUT", "600"))
        min_np = int(os.environ.get("TF_HVD_ELASTIC_MIN_NP", "1"))
        while True:
            decided = store.get(members_key)
            if decided is not None:
                members = [int(r) for r in decided.decode().split(",")]
                break
            now_alive = [r for r in range(old_size)
                         if store.get(prefix + "alive/%d" % r) is not None]
            if now_alive != alive:
                alive, stable_since = now_alive, time.monotonic()
            elif (time.monotonic() - stable_since >= SETTLE_SECONDS and alive[0] == old_rank
                  and len(alive) >= min_np):
                store.put(members_key, ",".join(str(r) for r in alive).encode())
                members = alive
                break
            if time.monotonic() > deadline:
                raise HorovodInternalError("elastic reset: the survivors did not agree "
                                           "within TF_HVD_ELASTIC_TIMEOUT")
            time.sleep(0.1)
    if old_rank not in members:
        raise HorovodInternalError("elastic reset: this rank (%d) reached the reset after "
                                   "the others had formed the job without it" % old_rank)
    os.environ[ROUND_ENV] = str(round_)
    return members.index(old_rank), len(members)


def _reset():
    """Shut the core down and initialise again among the ranks that are left."""
    old_rank, old_size = int(os.environ["HOROVOD_RANK"]), int(os.environ["HOROVOD_SIZE"])
    basics.shutdown()
    rank, size = _reform(old_rank, old_size)
    # One host (localhost) per job here: local = global, one cross rank.
    for name, value in (("HOROVOD_RANK", rank), ("HOROVOD_SIZE", size),
                        ("HOROVOD_LOCAL_RANK", rank), ("HOROVOD_LOCAL_SIZE", size),
                        ("HOROVOD_CROSS_RANK", 0), ("HOROVOD_CROSS_SIZE", 1)):
        os.environ[name] = str(value)
    basics.init()


def run(func):
    """Decorator: runs ``func(state, ...)``, and after a lost rank rolls ``state`` back to
    its last commit, re-forms the job with the ranks left and runs ``func`` again."""
    def wrapper(state, *args, **kwargs):
        resets = 0
        while True:
            state.sync()
            try:
                return func(state, *args, **kwargs)
            except _LOST_RANK_ERRORS as e:
                resets += 1
                print("tf_hvd.elastic: a collective failed (%s); rolling back to the last "
                      "commit and re-forming the job (reset %d)"
                      % ((str(e).splitlines() or [""])[-1][:300], resets), flush=True)
                state.restore()
                _reset()
                state.on_reset()
            except HostsUpdatedInterrupt:
                _reset()
                state.on_reset()
    wrapper.__name__ = getattr(func, "__name__", "wrapper")
    wrapper.__doc__ = func.__doc__
    return wrapper

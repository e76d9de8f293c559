"""What an elastic job rolls back to: State (commit / restore / sync), ObjectState
(Python attributes) and TensorFlowState (TensorFlow variables, eager or TF1).

    state = hvd.elastic.ObjectState(epoch=0, batch=0)
    state.batch = 5
    state.commit()        # saved; on every rank, raises HostsUpdatedInterrupt when the
                          # launcher added ranks
    state.restore()       # back to batch 5 after a lost rank
    state.sync()          # rank 0's values on every rank

Keras models: keras_state.py (TensorFlowKerasState).
"""

import copy

import numpy as np
import tensorflow as tf

from tf_hvd import functions, ops, topology
from tf_hvd.elastic import store
from tf_hvd.exceptions import HostsUpdatedInterrupt
from tf_hvd.reduce_ops import Max


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
        if not store.elastic_launcher():
            return  # not started by an elastic launcher (tfhvdrun --min-np)
        # rank 0 tells the launcher how far the job got (named should the state be lost)
        commits = getattr(self, "_tf_hvd_commits", None) if topology.rank() == 0 else None
        changed = store.hosts_version(commits) != store.seen["hosts_version"]
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

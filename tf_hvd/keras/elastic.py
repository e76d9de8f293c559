"""Elastic Keras training with Horovod's API (``horovod.tensorflow.keras.elastic``).

    import tf_hvd.keras as hvd

    hvd.init()
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.01)), ...)
    state = hvd.elastic.KerasState(model, batch=0, epoch=0)
    callbacks = [hvd.elastic.CommitStateCallback(state),
                 hvd.elastic.UpdateBatchStateCallback(state),
                 hvd.elastic.UpdateEpochStateCallback(state)]

    @hvd.elastic.run
    def train(state):
        state.model.fit(x, y, batch_size=32, epochs=epochs - state.epoch,
                        callbacks=callbacks)

    train(state)

Started with ``tfhvdrun -np 4 --min-np 2 python train.py``. When a rank is lost, the
others' fit raises; ``run`` rolls the state back to its last commit (model and optimizer
variables, ``epoch`` and ``batch``), re-forms the job and calls ``train`` again, which
resumes in the epoch it was in: the first epoch of the new fit runs only the batches that
epoch still had to do.

The counters: ``state.epoch`` is the number of epochs finished, ``state.batch`` the number
of batches finished in the current epoch (Horovod stores the index of the last one; a
count resumes without running a batch twice). The commit callback brings them up to
date before each commit, whatever the callbacks' order in the list.
"""

from tf_hvd.elastic import (run, State, ObjectState, TensorFlowState,  # noqa: F401
                            TensorFlowKerasState, HorovodInternalError,
                            HostsUpdatedInterrupt)
from tf_hvd.keras.callback_base import CallbackBase as _CallbackBase

__all__ = ["run", "KerasState", "CommitStateCallback", "UpdateBatchStateCallback",
           "UpdateEpochStateCallback", "State", "ObjectState", "TensorFlowState",
           "TensorFlowKerasState", "HorovodInternalError", "HostsUpdatedInterrupt"]


class KerasState(TensorFlowKerasState):
    """The state of a Keras model, its optimizer (default: the model's) and any Python
    attributes given as keywords (``KerasState(model, epoch=0, batch=0)``). ``backend``
    is accepted as in Horovod and not needed.

    Example:

    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> state = hvd.elastic.KerasState(model, epoch=0, batch=0)
    >>> state.epoch = 5
    >>> state.restore()                  # back to the last commit
    >>> state.epoch
    0

    A sharded DistributedOptimizer (``sharded=True``) is re-sharded from the last
    commit when the job re-forms at another size (tf_hvd.elastic.TensorFlowKerasState).
    """


def _counters(state):
    """The callbacks that keep ``state``'s counters, which a commit first brings up to
    date (so a commit after batch b saves batch b's counters in any callback order)."""
    if not hasattr(state, "_keras_counters"):
        state._keras_counters = []
    return state._keras_counters


class CommitStateCallback(_CallbackBase):
    """Commits ``state`` every ``batches_per_commit`` batches and at every epoch's end.

    Example:

    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> state = hvd.elastic.KerasState(model, epoch=0, batch=0)
    >>> callbacks = [hvd.elastic.UpdateEpochStateCallback(state),
    ...              hvd.elastic.CommitStateCallback(state, batches_per_commit=2)]
    >>> _ = model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=2, verbose=0,
    ...               callbacks=callbacks)
    >>> state.epoch = 7
    >>> state.restore()                  # the last commit: after epoch 2
    >>> state.epoch
    2
    """

    def __init__(self, state, batches_per_commit=1):
        super(CommitStateCallback, self).__init__()
        if batches_per_commit < 1:
            raise ValueError("batches_per_commit must be at least 1 (got %r)"
                             % (batches_per_commit,))
        self.state = state
        self.batches_per_commit = batches_per_commit
        self.batches_remaining = batches_per_commit

    def on_train_begin(self, logs=None):
        # every rank counts from the same point after a reset
        self.batches_remaining = self.batches_per_commit

    def on_train_batch_end(self, batch, logs=None):
        self.batches_remaining -= 1
        if self.batches_remaining == 0:
            for counter in _counters(self.state):
                counter.on_train_batch_end(batch, logs)
            self.state.commit()
            self.batches_remaining = self.batches_per_commit

    def on_epoch_end(self, epoch, logs=None):
        for counter in _counters(self.state):
            counter.on_epoch_end(epoch, logs)
        self.state.commit()


class UpdateBatchStateCallback(_CallbackBase):
    """Keeps ``state.batch``, the number of batches finished in the current epoch, and
    after a reset mid-epoch ends the first epoch once its remaining batches are done
    (when Keras knows the epoch's number of steps).

    Example:

    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> state = hvd.elastic.KerasState(model, epoch=0, batch=0)
    >>> seen = []
    >>> peek = keras.callbacks.LambdaCallback(
    ...     on_train_batch_end=lambda batch, logs: seen.append(state.batch))
    >>> _ = model.fit(np.ones((4, 2)), np.ones((4, 1)), batch_size=2, epochs=1,
    ...               verbose=0,
    ...               callbacks=[hvd.elastic.UpdateBatchStateCallback(state), peek])
    >>> seen, state.batch                # batches done; 0 again at the epoch's end
    ([1, 2], 0)
    """

    def __init__(self, state):
        super(UpdateBatchStateCallback, self).__init__()
        self.state = state
        self._offset = 0          # batches of this epoch finished before this fit began it
        self._stop_after = None   # batches this fit runs in the current epoch
        self._stopped_early = False
        if self not in _counters(state):
            _counters(state).append(self)

    def on_epoch_begin(self, epoch, logs=None):
        self._offset = int(self.state.batch or 0)
        steps = (self.params or {}).get("steps")
        self._stop_after = steps - self._offset if steps and self._offset else None

    def on_train_batch_end(self, batch, logs=None):
        self.state.batch = self._offset + batch + 1
        if self._stop_after is not None and batch + 1 >= self._stop_after:
            self.model.stop_training = True  # this epoch is complete; undone at its end
            self._stopped_early = True

    def on_epoch_end(self, epoch, logs=None):
        self.state.batch = 0
        self._offset, self._stop_after = 0, None
        if self._stopped_early:
            self._stopped_early = False
            self.model.stop_training = False


class UpdateEpochStateCallback(_CallbackBase):
    """Keeps ``state.epoch``, the number of epochs finished over all of the job's fits
    (Keras numbers each fit's epochs from 0, so fit ``epochs - state.epoch`` epochs).

    Example:

    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> state = hvd.elastic.KerasState(model, epoch=0, batch=0)
    >>> update = hvd.elastic.UpdateEpochStateCallback(state)
    >>> _ = model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=2, verbose=0,
    ...               callbacks=[update])
    >>> _ = model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=1, verbose=0,
    ...               callbacks=[update])
    >>> state.epoch                      # over both fits
    3
    """

    def __init__(self, state):
        super(UpdateEpochStateCallback, self).__init__()
        self.state = state
        self.initial_epoch = state.epoch
        if self not in _counters(state):
            _counters(state).append(self)

    def on_train_begin(self, logs=None):
        self.initial_epoch = self.state.epoch

    def on_epoch_end(self, epoch, logs=None):
        self.state.epoch = self.initial_epoch + epoch + 1

"""``hvd.callbacks.BackupAndRestore``: Keras' BackupAndRestore for a job of many ranks.

Keras' own callback, given a directory per rank, lets each rank save on its own: a job
killed while rank 0 had written epoch 5 and rank 1 epoch 4 comes back with its ranks at
different steps, and a kill during a save leaves a half-written file. This one saves
under tf_hvd's commit protocol (tf_hvd.checkpoint): one directory for the job, each save
a new step published only when every rank's part is on disk, and at the start of
``fit`` every rank loads the same newest complete step (at any number of ranks, sharded
optimizer state and embedding tables re-sharded) and skips the batches of the current
epoch that were trained before it. With ``tfhvdrun --max-restarts N`` a killed job comes
back and continues as if it had not stopped::

    model.fit(x, y, epochs=10, callbacks=[
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd.callbacks.BackupAndRestore("/shared/backup", save_freq=100)])
"""

import logging
import shutil

from tf_hvd import topology
from tf_hvd._keras.checkpointer import Checkpointer
from tf_hvd.exceptions import CheckpointSaveError
from tf_hvd.keras.callback_base import CallbackBase

_log = logging.getLogger("tf_hvd")


class BackupAndRestore(CallbackBase):
    """Save the training state every epoch or every ``save_freq`` batches; at the start
    of ``fit`` restore the newest complete save on every rank.

    Args:
      backup_dir: one directory for the job, on a file system every rank reaches.
      save_freq: ``"epoch"`` or a number of batches.
      delete_checkpoint: remove ``backup_dir`` when training ends (as Keras does).
      keep: complete saves kept (the newest ones).
      root_rank: the rank that writes the model and optimizer and publishes saves.

    Restored: the model's variables (with the layers' random seed states), the
    optimizer's state (sharded or not), DistributedEmbedding tables and their slots, the
    epoch and the batch within it (the batches already trained are skipped: the data
    must give the same batches in the same order, e.g. ``shuffle=False`` or a seeded
    ``tf.data`` pipeline). Metrics of the resumed epoch count only the batches after
    the restart. A save that fails (a full disk, no permission) is logged on the rank
    that saw it, the previous save stays, and training goes on.

    Example:

    >>> import tempfile
    >>> backup_dir = tempfile.mkdtemp()
    >>> def fit():
    ...     model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    ...     model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)),
    ...                   loss="mse")
    ...     backup = hvd.callbacks.BackupAndRestore(backup_dir, save_freq=1,
    ...                                             delete_checkpoint=False)
    ...     model.fit(np.ones((4, 2)), np.ones((4, 1)), batch_size=2, epochs=3,
    ...               verbose=0, callbacks=[backup])
    ...     return model
    >>> first = fit()                     # 6 steps, each saved
    >>> again = fit()                     # resumes after the 6th: nothing left to train
    >>> bool(np.array_equal(first.get_weights()[0], again.get_weights()[0]))
    True
    """

    def __init__(self, backup_dir, save_freq="epoch", delete_checkpoint=True, keep=2,
                 root_rank=0):
        super(BackupAndRestore, self).__init__()
        if not backup_dir:
            raise ValueError("BackupAndRestore: empty backup_dir")
        if save_freq != "epoch" and not (isinstance(save_freq, int) and save_freq > 0):
            raise ValueError("BackupAndRestore: save_freq must be 'epoch' or a positive "
                             "number of batches, not %r" % (save_freq,))
        self.backup_dir = str(backup_dir)
        self.save_freq = save_freq
        self.delete_checkpoint = delete_checkpoint
        self.keep = keep
        self.root_rank = root_rank
        self._ckpt = None
        self._epoch = 0       # the epoch being trained
        self._batch = 0       # batches of it trained (skipped ones included)
        self._step = 0        # batches trained since the first start, over restarts
        self._to_skip = 0     # batches of the resumed epoch trained before the restart
        self._skipped_last = False
        self._train_function = None

    def on_train_begin(self, logs=None):
        self._ckpt = Checkpointer(self.backup_dir, self.model, keep=self.keep,
                                  root_rank=self.root_rank)
        meta = self._ckpt.restore()
        if not meta:
            return
        self._step = int(meta["step"])
        self._epoch = int(meta.get("epoch", 0))
        self._to_skip = int(meta.get("batch", 0))
        self.model._initial_epoch = self._epoch
        if self._to_skip:
            self._skip_trained_batches()

    def _skip_trained_batches(self):
        """Until the batches trained before the restart are passed, a training call
        takes its batches from the iterator and leaves the model as it is."""
        original = self.model.train_function
        per_call = int(getattr(self.model, "steps_per_execution", 1) or 1)

        def skipping(iterator):
            if self._to_skip <= 0:
                self.model.train_function = original
                self._skipped_last = False
                return original(iterator)
            for _ in range(min(per_call, self._to_skip)):
                next(iterator)
            self._to_skip -= per_call
            self._skipped_last = True
            return {}
        self._train_function = original
        self.model.train_function = skipping

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        self._batch = 0

    def on_train_batch_end(self, batch, logs=None):
        self._batch = batch + 1
        if self._skipped_last:
            self._skipped_last = False
            return
        self._step += 1
        if self.save_freq != "epoch" and self._step % self.save_freq == 0:
            steps = (self.params or {}).get("steps")
            if steps and self._batch >= steps:  # the epoch's last batch: resume at the next
                self._save(epoch=self._epoch + 1, batch=0)
            else:
                self._save(epoch=self._epoch, batch=self._batch)

    def on_epoch_end(self, epoch, logs=None):
        if self.save_freq == "epoch":
            self._save(epoch=epoch + 1, batch=0)

    def _save(self, **counters):
        try:
            self._ckpt.save(self._step, **counters)
        except CheckpointSaveError as e:
            _log.warning("tf_hvd BackupAndRestore: %s; training goes on", e)

    def on_train_end(self, logs=None):
        if self._train_function is not None:
            self.model.train_function = self._train_function
            self._train_function = None
        self.model._initial_epoch = None
        if self.delete_checkpoint:
            if not topology.is_initialized() or topology.rank() == self.root_rank:
                shutil.rmtree(self.backup_dir, ignore_errors=True)

"""Saving a training job's state every N steps and resuming every rank from the same
step, under the commit protocol (tf_hvd.checkpoint): the loop helper that the Keras
callback ``tf_hvd.keras.callbacks.BackupAndRestore`` stands on.

Every rank calls ``restore`` once before training (the ranks agree on the newest step
that is complete for all of them and load it, at any number of ranks) and ``save`` at the
same steps. A save writes a new step: the saving rank the model and the whole optimizer
state, every rank the rows of the sharded tables it holds; then the saving rank
publishes it once every rank's part is on disk. Ranks whose part is small do not wait for
the saving rank's write::

    ckpt = hvd.Checkpointer("/shared/ckpt", model, optimizer)
    start = ckpt.restore()                    # {} on a fresh start, else the saved meta
    for step in range(start.get("step", 0), 1000):
        train_step(next(batches))
        if (step + 1) % 100 == 0:
            ckpt.save(step + 1)               # every rank; "step" in the meta is step + 1
"""

import logging

from tf_hvd import functions
from tf_hvd._keras import ranks, training_state
from tf_hvd.checkpoint import StepWriter, complete_steps, new_token, publish
from tf_hvd.checkpoint.steps import Step
from tf_hvd.exceptions import CheckpointError, CheckpointSaveError

_log = logging.getLogger("tf_hvd")


class Checkpointer(object):
    """A Keras model's training state (weights, the layers' random seed states, the
    optimizer's state, sharded or not, DistributedEmbedding tables, and the counters
    given to ``save``) saved under ``directory`` every time ``save`` is called.

    Args:
      directory: a directory every rank reaches (one file system shared by the ranks'
        hosts; on one host, any local path).
      model: the Keras model.
      optimizer: its optimizer (default: ``model.optimizer``).
      keep: how many complete steps to keep (older ones are removed once a newer one
        is published; at least 1).
      root_rank: the rank that writes the model and optimizer and publishes steps.
      timeout: seconds the publishing rank waits for the other ranks' parts.

    Example:

    >>> import tempfile
    >>> directory = tempfile.mkdtemp()
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> opt = hvd.DistributedOptimizer(keras.optimizers.Adam(0.1))
    >>> ckpt = hvd.Checkpointer(directory, model, opt)
    >>> ckpt.restore()                    # nothing saved yet
    {}
    >>> path = ckpt.save(10, epoch=1)
    >>> hvd.Checkpointer(directory, model, opt).restore()
    {'epoch': 1, 'step': 10}
    """

    def __init__(self, directory, model, optimizer=None, keep=2, root_rank=0,
                 timeout=600.0):
        self.directory = str(directory)
        self.model = model
        self._optimizer = optimizer
        self.keep = max(1, int(keep))
        self.root_rank = int(root_rank)
        self.timeout = float(timeout)
        self._token = None

    @property
    def optimizer(self):
        return self._optimizer if self._optimizer is not None else \
            getattr(self.model, "optimizer", None)

    def _agree_token(self):
        rank, size = ranks.rank_size()
        if self._token is None:
            token = new_token() if rank == self.root_rank else None
            self._token = token if size == 1 else functions.broadcast_object(
                token, self.root_rank, name="Checkpointer.token")
        return self._token

    def newest_step(self):
        """The newest step complete for every rank (None if none), agreed by the ranks
        (a collective). CheckpointError on every rank where the ranks see different
        steps of a directory that should be shared."""
        rank, size = ranks.rank_size()
        mine = complete_steps(self.directory)
        views = [mine] if size == 1 else functions.allgather_object(
            mine, name="Checkpointer.steps")
        chosen = views[self.root_rank][-1] if views[self.root_rank] else None
        blind = [r for r, v in enumerate(views) if chosen is not None and chosen not in v]
        if blind:
            raise CheckpointError(
                "checkpoint directory %s: rank %d's newest complete step is %d, which "
                "rank(s) %s do not see (they see %s): the directory must be on a file "
                "system every rank shares" % (
                    self.directory, self.root_rank, chosen, ", ".join(map(str, blind)),
                    "; ".join("rank %d: %s" % (r, views[r][-3:] or "none") for r in blind)))
        if rank == self.root_rank:
            Step.newest(self.directory)  # says which half-written newer steps are ignored
        return chosen

    def restore(self):
        """Load the newest complete step into the model on every rank (a collective;
        call it on every rank before the first step). Returns the meta saved with it
        (``step`` and the counters given to ``save``), or {} when there is none."""
        self._agree_token()
        step = self.newest_step()
        if step is None:
            training_state.build_optimizer(self.model, self.optimizer)
            return {}
        loaded = Step(self.directory, step)
        training_state.load(loaded, self.model, self.optimizer)
        _log.info("tf_hvd checkpoint: resumed from %s", loaded.directory)
        return dict(loaded.meta.get("counters", {}), step=loaded.step)

    def save(self, step, **counters):
        """Save the state as step ``step`` (an int that grows from save to save) with
        ``counters`` (JSON values: epoch, batch, ...); every rank calls it. Returns the
        published step's directory on the root rank, None elsewhere.

        CheckpointSaveError (an OSError) when this rank's part or the publication
        fails: the step is not published, the previous complete step stays, and
        training may go on."""
        rank, size = ranks.rank_size()
        token = self._agree_token()
        arrays, meta = training_state.gather(self.model, self.optimizer, rank,
                                             self.root_rank)
        writer = StepWriter(self.directory, step, rank, size, token)
        try:
            if arrays is not None:
                writer.write_arrays(training_state.MODEL_FILE, arrays)
            tables = training_state.write_tables(self.model, writer)
            own = writer.finish({"tables": tables} if tables is not None else {},
                                publishing=rank == self.root_rank)
        except CheckpointSaveError as e:
            writer.fail(e)
            raise
        if rank != self.root_rank:
            return None
        meta = dict(meta, counters=dict(counters), size=size)
        if tables is not None:
            meta["tables"] = tables
        return publish(self.directory, step, size, token, meta=meta, keep=self.keep,
                       timeout=self.timeout, own=own)

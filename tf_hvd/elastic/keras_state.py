"""TensorFlowKerasState: a Keras model and its optimizer as an elastic job's state,
sharded state (a sharded optimizer's slots, DistributedEmbedding tables) included.

    state = hvd.elastic.TensorFlowKerasState(model, epoch=0)
    state.commit()      # every rank: the variables, and each holder's whole state
    state.restore()     # after a lost rank: back to the commit
    state.sync()        # after the job re-formed: rank 0's state, laid out anew
"""

from tf_hvd import functions
from tf_hvd._keras import flavors, training_state
from tf_hvd._keras.sharded_state.protocol import holders as sharded_state_holders
from tf_hvd.elastic import store
from tf_hvd.elastic.state import TensorFlowState
from tf_hvd.sharded_rows import holds_sharded_state, is_sharded_rows


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
        self._whole = self._gather_whole() if store.seen["holds"] else []

    def _optimizer(self):
        return self.optimizer if self.optimizer is not None else \
            getattr(self.model, "optimizer", None)

    def _holders(self):
        """The holders of sharded state: the model's layers, then the optimizer."""
        return sharded_state_holders(self.model, self._optimizer())

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

    def sync(self):
        # Every rank lays each holder out for the ranks as they are now, in the same
        # order (their collectives meet); one that had no state (it joined) makes it.
        holders = self._holders()
        for holder in holders:
            holder.lay_out(self.model)
        # An unsharded optimizer's variables, made now so that a rank that has not
        # trained yet (one that joins) broadcasts the same variables as the others.
        training_state.build_optimizer(self.model, self._optimizer())
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

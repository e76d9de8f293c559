"""What every sharded optimizer class has, whatever its Keras: the methods of
``ShardedMethods`` (the state as a whole: gather_state, load_state, reshard, saving and
loading, and the sharded-state protocol, tf_hvd._keras.sharded_state.protocol, that
elastic states, save_model and checkpoints ask), and the class-making step that adds one Keras' own step (keras3.py,
tf_keras.py)::

    cls = make_sharded_class(keras.optimizers.Adam, params, dict(apply=apply, ...))
"""

import tensorflow as tf

from tf_hvd._keras.sharding import full_state
from tf_hvd.exceptions import ShardingError
from tf_hvd.sharded_rows import SHARDED_STATE


class ShardedMethods(object):
    """The methods every sharded optimizer class has (Keras 3's, keras3.py, and
    tf-keras', tf_keras.py): they use only ``self._hvd_shard`` (a ShardedState) and
    ``type(self)._hvd_base`` (the wrapped class)."""

    def register_local_var(self, var):
        raise ShardingError(
            "a sharded optimizer has no local variables: every parameter's state is "
            "split over the ranks; use sharded=False with register_local_var / "
            "PartialDistributedOptimizer")

    def gather_state(self, root_rank=0):
        """Collect the whole optimizer state on ``root_rank`` for a checkpoint
        (``root_rank=None``: on every rank, as an elastic commit keeps it).

        Every rank of the optimizer must call it (it allgathers the slots, one
        at a time); afterwards ``model.save(...)`` / ``model.save_weights(...)``
        on ``root_rank`` writes an ordinary Keras checkpoint holding what an
        unsharded optimizer of the same class would hold, until the next step.
        Returns that state (a list of numpy arrays in the unsharded
        optimizer's variable order) on ``root_rank``, None elsewhere::

            state = opt.gather_state(root_rank=None)     # every rank
            opt.load_state(state)                         # back to it, any time
        """
        st = self._hvd_shard
        if st.layout is None:
            raise ShardingError("gather_state(): the optimizer is not built yet")
        values = full_state.gather(st, self, root_rank)
        st.pending = None if values is None else (int(self.iterations.numpy()), values)
        return values

    def load_state(self, values, root_rank=None):
        """Set the optimizer to a whole (unsharded) state: ``values`` as
        ``gather_state`` returns them, a list in the unsharded optimizer's
        variable order; each rank keeps its slices of the slots. With
        ``root_rank``, ``root_rank``'s ``values`` are broadcast first (every rank
        calls it; ``values`` is ignored elsewhere). Returns the state loaded.
        ShardingError (a ValueError) naming what differs if it does not fit::

            state = opt.gather_state(root_rank=None)
            opt.reshard()                                 # after the job re-formed
            opt.load_state(state, root_rank=0)            # rank 0's, every rank's slice
        """
        st = self._hvd_shard
        if st.layout is None:
            raise ShardingError("load_state(): the optimizer is not built yet")
        if root_rank is not None:
            values = full_state.broadcast(st, self, values, root_rank)
        full_state.load(st, self, values)
        return values

    def reshard(self):
        """Lay the state out again over the optimizer's ranks as they are now
        (after an elastic job re-formed at another size): the slot variables
        are made anew for this rank's new slice, with their initial values, and
        the ranks check again that they have the same variables (a collective).
        Then ``load_state`` fills them; tf_hvd.elastic's Keras states do both::

            state = opt.gather_state(root_rank=None)      # at N ranks
            ...                                           # the job re-forms at M
            opt.reshard()
            opt.load_state(state, root_rank=0)
        """
        st = self._hvd_shard
        if st.layout is None:
            raise ShardingError("reshard(): the optimizer is not built yet")
        variables = st.model_vars
        with tf.init_scope():
            st.unbuild()
        self.build(variables)

    # -- the sharded-state protocol (tf_hvd._keras.sharded_state.protocol) --
    def sharded_state_exists(self):
        """Whether the slots exist (the optimizer was built with the other ranks)."""
        return self._hvd_shard.layout is not None

    def gather_whole(self, root_rank=None):
        """``gather_state``: the whole state, in the unsharded optimizer's order."""
        return self.gather_state(root_rank)

    def load_whole(self, values, root_rank=None):
        """``load_state``: this rank's slices of a whole state."""
        return self.load_state(values, root_rank)

    def lay_out(self, model):
        """``reshard`` if built; a rank that has no slots yet (it joined) builds the
        optimizer on ``model``'s trainable variables: the same collective."""
        if self.sharded_state_exists():
            self.reshard()
        elif list(model.trainable_variables):
            self.build(list(model.trainable_variables))

    def gather_for_save(self, root_rank=0):
        """Gather the slots to ``root_rank`` for its next Keras save (nothing to do
        before the optimizer is built: it then saves what Keras saves)."""
        if self.sharded_state_exists():
            self.gather_state(root_rank)

    def replicated_variables(self):
        """The optimizer variables every rank holds in full (iterations,
        learning rate, a loss scale), what a broadcast may send."""
        st = self._hvd_shard
        if st.slot_keys is None:
            return []
        return [v for key, v in zip(st.slot_keys, self.variables) if key[0] == "own"]

    def save_own_variables(self, store):
        st = self._hvd_shard
        if st.layout is None:
            return type(self)._hvd_base.save_own_variables(self, store)
        if st.size == 1:
            values = full_state.gather(st, self, 0)
        elif st.pending is not None and st.pending[0] == int(self.iterations.numpy()):
            values = st.pending[1]
        else:
            raise ShardingError(
                "a sharded optimizer holds 1/%d of the optimizer state on each rank: "
                "call optimizer.gather_state(root_rank) on every rank first (or use "
                "tf_hvd.keras.save_model), then "
                "save on that rank" % st.size)
        for i, value in enumerate(values):
            store[str(i)] = value

    def load_own_variables(self, store):
        st = self._hvd_shard
        if st.layout is None:
            return type(self)._hvd_base.load_own_variables(self, store)
        values = [store[str(i)] for i in range(len(store.keys()))]
        full_state.load(st, self, values)


def shared_methods():
    """ShardedMethods' methods, for a class namespace."""
    return dict((k, v) for k, v in vars(ShardedMethods).items() if not k.startswith("__"))


def make_sharded_class(base, params, methods):
    """The sharded subclass of ``base`` with ``methods`` (one Keras' step) and
    ShardedMethods'; same name, module and docstring as ``base``, so a saved
    model names the plain class."""
    namespace = dict(shared_methods())
    namespace.update(methods)
    namespace.update({
        "__module__": base.__module__,
        "__qualname__": getattr(base, "__qualname__", base.__name__),
        "__doc__": base.__doc__,
        "_hvd_distributed": True,
        SHARDED_STATE: True,      # the marker of a holder of sharded state
        "_hvd_params": params,
        "_hvd_base": base,
    })
    return type(base.__name__, (base,), namespace)

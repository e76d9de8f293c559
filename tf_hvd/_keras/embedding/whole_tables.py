"""A DistributedEmbedding's tables as wholes: read and set them, gather them for a
save, load them back at any number of ranks, and lay them out again after an elastic
job re-formed; with ``sharded_state_exists`` and ``lay_out``, the protocol of a
holder of sharded state (tf_hvd._keras.sharded_state.protocol).

    whole = layer.gather_whole()       # every rank; {key: array}
    layer.reshard()                    # after the job re-formed
    layer.load_whole(whole)            # each rank takes its rows

``WholeTables`` is a part of DistributedEmbedding (layer.py), over its tables.
"""

import numpy as np

from tf_hvd._keras import ranks
from tf_hvd._keras.embedding import checkpoint
from tf_hvd._keras.embedding.tables import make_slots
from tf_hvd._keras.sharded_state.row_layout import RowLayout
from tf_hvd.functions import broadcast_object


class WholeTables(object):
    """DistributedEmbedding's methods over its whole tables (collectives)."""

    def table_names(self):
        return list(self._table_configs)

    def get_table(self, name, root_rank=None):
        """The whole table ``name`` as a numpy array, gathered from every rank
        (a collective; ``root_rank``: only there, None elsewhere)."""
        state = self._hvd.tables[name]
        return checkpoint.gather_rows(state.shard, state.layout, root_rank,
                                      "%s.%s" % (self.name, name))

    def set_table(self, name, values):
        """Set table ``name`` from its whole value (each rank keeps its rows)."""
        state = self._hvd.tables[name]
        state.shard.assign(checkpoint.rows_of(np.asarray(values), state.layout,
                                              state.rank, name))

    def get_slot(self, name, slot, root_rank=None):
        """The whole optimizer slot ``slot`` of table ``name`` (a collective)."""
        state = self._hvd.tables[name]
        return checkpoint.gather_rows(state.slots[slot], state.layout, root_rank,
                                      "%s.%s.%s" % (self.name, name, slot))

    def gather_for_save(self, root_rank=0):
        """Gather every table and slot to ``root_rank`` so that its next
        ``save_own_variables`` writes them whole (tf_hvd.keras.save_model
        calls it on every rank)."""
        self._hvd.pending = checkpoint.gather_layer(self, root_rank)

    def gather_whole(self, root_rank=None):
        """Every table and slot, whole, as ``{key: array}`` on ``root_rank`` (None:
        on every rank); a collective. ``load_whole`` takes it back at any size::

            state = layer.gather_whole()     # before the job re-forms
            layer.reshard(); layer.load_whole(state)
        """
        return checkpoint.gather_layer(self, root_rank)

    def load_whole(self, values, root_rank=None):
        """Each rank takes its rows of ``values`` (``gather_whole``'s result); with
        ``root_rank``, that rank's ``values`` are broadcast first (a collective).
        Returns the values loaded."""
        if root_rank is not None and ranks.rank_size()[1] > 1:
            values = broadcast_object(values, int(root_rank),
                                      name="DistributedEmbedding.%s.whole" % self.name)
        checkpoint.load_whole(self, values)
        return values

    def own_steps(self):
        """``{table name: step count}`` of the tables that have their own optimizer
        (TableConfig.optimizer), what a checkpoint keeps beside the rows."""
        return dict((name, int(state.own_optimizer.iterations.numpy()))
                    for name, state in self._hvd.tables.items()
                    if state.own_optimizer is not None)

    def load_own_steps(self, steps):
        """Set the step counts ``own_steps`` returned (tables not named keep theirs)."""
        for name, count in steps.items():
            state = self._hvd.tables.get(name)
            if state is not None and state.own_optimizer is not None:
                state.own_optimizer.iterations.assign(int(count))

    # -- the sharded-state protocol (tf_hvd._keras.sharded_state.protocol) --
    def sharded_state_exists(self):
        """Whether the tables were laid out with the other ranks (the layer has
        looked ids up or re-sharded): a rank that just joined has not."""
        return bool(self.built and self._hvd.checked)

    def lay_out(self, model=None):
        """``reshard``: lay the tables out over the ranks as they are now."""
        self.reshard()

    def save_own_variables(self, store):
        checkpoint.save_layer(self, store)

    def load_own_variables(self, store):
        checkpoint.load_layer(self, store)

    def reshard(self):
        """Lay the tables out again over the ranks as they are now (after an
        elastic job re-formed): new shards and slots for this rank's rows, to
        be filled by ``load_whole`` (tf_hvd's elastic Keras state does both)."""
        rank, size = ranks.rank_size()
        self._check_ranks(size)
        for state in self._hvd.tables.values():
            if state.layout.n == size and state.rank == rank:
                continue
            state.layout = RowLayout(state.config.vocabulary_size, size,
                                     state.config.sharding)
            state.rank = rank
            checkpoint.replace_shard(self, state)
            if state.rule_class is not None:
                make_slots(state, self.variable_dtype)

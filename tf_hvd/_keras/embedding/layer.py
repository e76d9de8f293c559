"""DistributedEmbedding: a Keras 3 layer whose tables are sharded over the ranks.

Each table's rows are split over the ranks (TableConfig.sharding: ``"mod"`` or
``"range"``, tf_hvd._keras.sharded_state.row_layout); each rank holds its rows (a Keras variable of
``rows_on(rank)`` rows, marked as sharded so that no allreduce or broadcast
touches it) and, once an optimizer updates it, that optimizer's slots for
those rows. A call looks every table's ids up over the ranks
(exchange.py: distinct ids travel once, by alltoall) and reduces multi-hot
features with the table's combiner. The table's gradient (an IndexedSlices of
local rows, averaged over ranks by the backward alltoall) is applied by a
tf_hvd DistributedOptimizer through ``apply_sparse_gradient``: only the rows
in the batch change (sparse_rules.py). A table's initial rows depend on its
initializer's seed and the row ids, not on the number of ranks
(sharded_state/initial_rows.py). The layer is a holder of sharded state
(sharded_state/protocol.py): elastic states, save_model and checkpoints gather,
load and re-shard it through that protocol.

    layer = DistributedEmbedding({"item": FeatureConfig("item", items, (None,), (None, 16))})
    vectors = layer({"item": ids})["item"]          # [batch, 16]

This file is the layer's Keras surface (building, the forward pass, its config); its
parts: the tables' state (tables.py), the inputs (features.py), the ranks' agreement
(table_checks.py), the optimizer's side (sparse_updates.py), the whole tables and the
sharded-state protocol (whole_tables.py), the config of its features
(feature_configs.py).
"""

import collections

import keras
import tensorflow as tf

from tf_hvd._keras import ranks
from tf_hvd._keras.embedding import config as config_lib
from tf_hvd._keras.embedding.exchange import LookupContext, TableIds, lookup_group
from tf_hvd._keras.embedding.feature_configs import feature_config, map_feature_dicts
from tf_hvd._keras.embedding.features import flatten_shapes, parse_feature
from tf_hvd._keras.embedding.sparse_rules import rule_for
from tf_hvd._keras.embedding.sparse_updates import SparseUpdates
from tf_hvd._keras.embedding.table_checks import check_same_tables, signature
from tf_hvd._keras.embedding.tables import Table, TableHolder, initializer_of
from tf_hvd._keras.embedding.whole_tables import WholeTables
from tf_hvd._keras.sharded_state.row_layout import RowLayout
from tf_hvd._keras.state import var_key
from tf_hvd.sharded_rows import SHARDED_STATE, mark_sharded_rows


@keras.saving.register_keras_serializable(package="tf_hvd")
class DistributedEmbedding(WholeTables, SparseUpdates, keras.layers.Layer):
    """Embedding tables sharded over the ranks, looked up by alltoall.

    Args:
      feature_configs: a FeatureConfig, or a nested structure (dict, list) of
        them (tf_hvd.keras.layers' or ``keras_rs.layers``' classes); the
        layer's inputs and outputs have the same structure.
      table_stacking: keras-rs' argument, accepted and ignored (each table is
        its own variable here).
      update_stats: keras-rs' argument, accepted and ignored.
      default_row: None (an id outside a table's vocabulary is an error on
        every rank naming the table, the id and the rank it came from), an
        int row every such id reads instead, or a dict ``{table name: row}``.
      table_sharding: ``{table name: "mod" | "range"}``, overriding the tables'
        ``sharding`` (for keras-rs configs, which have no such field).

    Inputs per feature: int ids of shape ``[batch]`` (one id a sample: output
    ``[batch, dim]``), ``[batch, k]`` (``k`` ids a sample, reduced with the
    table's combiner), a ``tf.RaggedTensor`` ``[batch, None]`` or a
    ``tf.SparseTensor`` ``[batch, k]``. ``weights`` (same structure, float)
    weight the ids in the combiner, as keras-rs' ``weights``.

    In one process the layer holds whole tables; under tfhvdrun each rank holds
    1/N of the rows, and every rank calls the layer (the first call checks that
    all ranks describe the same tables; every call exchanges ids and rows).

    Example:

    >>> import numpy as np
    >>> from tf_hvd.keras.layers import DistributedEmbedding, FeatureConfig, TableConfig
    >>> table = TableConfig("items", vocabulary_size=100, embedding_dim=4,
    ...                     combiner="sum")
    >>> layer = DistributedEmbedding(FeatureConfig("item", table, (2, 3), (2, 4)))
    >>> tuple(layer(np.array([[1, 2, 3], [4, 5, 5]])).shape)
    (2, 4)
    """

    def __init__(self, feature_configs, *, table_stacking="auto", update_stats=False,
                 default_row=None, table_sharding=None, **kwargs):
        super().__init__(**kwargs)
        self.feature_configs = feature_configs
        self.table_stacking = table_stacking
        self.update_stats = update_stats
        self.default_row = default_row
        self.table_sharding = dict(table_sharding or {})
        self._features = []            # (FeatureConfig, table name), flat order
        tables = collections.OrderedDict()
        for feature in tf.nest.flatten(feature_configs):
            table = config_lib.as_table_config(
                feature.table, self.table_sharding.get(feature.table.name))
            config_lib.check_table(table)
            known = tables.get(table.name)
            if known is not None and signature(known) != signature(table):
                raise ValueError(
                    "DistributedEmbedding: two different tables are named '%s' "
                    "(features share a table by giving the same TableConfig)"
                    % table.name)
            tables[table.name] = table
            self._features.append((feature, table.name))
        unknown = set(self.table_sharding) - set(tables)
        if unknown:
            raise ValueError("DistributedEmbedding: table_sharding names no table of "
                             "the layer: %s" % ", ".join(sorted(unknown)))
        self._hvd = TableHolder()
        self._table_configs = tables

    # -- building ------------------------------------------------------
    def build(self, input_shape=None):
        rank, size = ranks.rank_size()
        holder = self._hvd
        for name, table in self._table_configs.items():
            state = Table(table, RowLayout(table.vocabulary_size, size,
                                            table.sharding), rank)
            state.shard = self.add_weight(
                shape=state.local_shape(), initializer=initializer_of(state),
                name=name, trainable=True, dtype=self.variable_dtype)
            mark_sharded_rows(state.shard, self)
            if table.optimizer is not None:
                own = keras.optimizers.get(table.optimizer)
                state.own_optimizer = own.__class__.from_config(own.get_config())
                state.rule = rule_for(state.own_optimizer, name)
            holder.tables[name] = state
            holder.by_variable[var_key(state.shard)] = state
        self.built = True

    def compute_output_shape(self, input_shape):
        shapes = []
        flat_shapes = flatten_shapes(input_shape, len(self._features))
        for (feature, table_name), shape in zip(self._features, flat_shapes):
            dim = int(self._table_configs[table_name].embedding_dim)
            batch = shape[0] if shape else None
            shapes.append((batch, dim))
        return tf.nest.pack_sequence_as(self.feature_configs, shapes)

    # -- the forward pass ----------------------------------------------
    def call(self, inputs, weights=None, training=None):
        rank, size = ranks.rank_size()
        if not self._hvd.checked:
            self._check_ranks(size)
        flat_inputs = tf.nest.flatten(inputs, expand_composites=False)
        if len(flat_inputs) != len(self._features):
            raise ValueError(
                "DistributedEmbedding '%s' has %d features but was called with %d "
                "inputs" % (self.name, len(self._features), len(flat_inputs)))
        flat_weights = ([None] * len(flat_inputs) if weights is None
                        else tf.nest.flatten(weights, expand_composites=False))
        parsed = [parse_feature(x, w) for x, w in zip(flat_inputs, flat_weights)]
        outputs = [None] * len(parsed)
        # Tables of one width travel together: one alltoall for their ids, one
        # for their rows (and one for the rows' gradients).
        groups = collections.OrderedDict()
        for name, state in self._hvd.tables.items():
            members = [i for i, (_, t) in enumerate(self._features) if t == name]
            if members:
                groups.setdefault(int(state.config.embedding_dim), []).append(
                    (name, state, members))
        for dim, group in groups.items():
            lookups = [TableIds(state.shard.value,
                                tf.concat([parsed[i].ids for i in members], 0),
                                state.layout, name, self._default_row(name))
                       for name, state, members in group]
            ctx = LookupContext(self.name, "dim%d" % dim, rank, size)
            for (name, state, members), rows in zip(group, lookup_group(lookups, ctx)):
                sizes = tf.stack([tf.shape(parsed[i].ids)[0] for i in members])
                for i, part in zip(members, tf.split(rows, sizes, num=len(members))):
                    outputs[i] = parsed[i].combine(part, state.config.combiner,
                                                   self.compute_dtype)
        return tf.nest.pack_sequence_as(self.feature_configs, outputs)

    def _check_ranks(self, size):
        """Every rank describes the same tables (a collective, eager even while a
        call is traced). It runs at the first call and at every re-shard, when all
        ranks are there, not at build: a rank joining an elastic job builds its
        model while the others are elsewhere."""
        with tf.init_scope():
            check_same_tables(self.name, self._table_configs, self._features, size)
        self._hvd.checked = True

    def _default_row(self, table_name):
        row = self.default_row
        if isinstance(row, dict):
            row = row.get(table_name)
        if row is None:
            return None
        vocab = int(self._table_configs[table_name].vocabulary_size)
        if not 0 <= int(row) < vocab:
            raise ValueError("DistributedEmbedding '%s': default_row %d of table '%s' "
                             "is not a row of it [0, %d)" % (self.name, row,
                                                             table_name, vocab))
        return int(row)

    def get_config(self):
        config = super().get_config()
        config.update({
            "feature_configs": tf.nest.map_structure(lambda f: feature_config(f),
                                                     self.feature_configs),
            "table_stacking": self.table_stacking, "update_stats": self.update_stats,
            "default_row": self.default_row, "table_sharding": self.table_sharding,
        })
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        tables = {}

        def feature(c):
            fc = config_lib.FeatureConfig.from_config(c)
            # Features that shared one table share one TableConfig again.
            fc.table = tables.setdefault(fc.table.name, fc.table)
            return fc

        config["feature_configs"] = map_feature_dicts(feature, config["feature_configs"])
        return cls(**config)


# the marker of a holder of sharded state (tf_hvd._keras.sharded_state.protocol)
setattr(DistributedEmbedding, SHARDED_STATE, True)

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
"""

import collections

import keras
import numpy as np
import tensorflow as tf

from tf_hvd import topology
from tf_hvd._keras.embedding import checkpoint, config as config_lib
from tf_hvd._keras.embedding.exchange import LookupContext, TableIds, lookup_group
from tf_hvd._keras.embedding.sparse_rules import rule_for
from tf_hvd._keras.sharded_state.initial_rows import initial_rows
from tf_hvd._keras.sharded_state.row_layout import RowLayout
from tf_hvd._keras.state import var_key
from tf_hvd.exceptions import ShardingError
from tf_hvd.functions import allgather_object, broadcast_object
from tf_hvd.sharded_rows import SHARDED_STATE, mark_sharded_rows, sharded_rows_owner


def _rank_size():
    if not topology.is_initialized():
        return 0, 1
    return topology.rank(), topology.size()


class _Table(object):
    """One table's state on this rank (kept out of Keras' tracking: the layer
    tracks the shard itself; slots are saved by the layer's own methods)."""

    def __init__(self, config, layout, rank):
        self.config = config
        self.layout = layout
        self.rank = rank
        self.shard = None          # keras.Variable [rows_on(rank), dim]
        self.slots = {}            # name -> keras.Variable, same shape
        self.rule = None
        self.rule_class = None     # the optimizer class the slots were made for
        self.own_optimizer = None  # TableConfig.optimizer, cloned
        self.loaded_slots = {}     # name -> this rank's rows, from a checkpoint
        self.loaded_iterations = None

    @property
    def name(self):
        return self.config.name

    def local_shape(self):
        return (self.layout.rows_on(self.rank), int(self.config.embedding_dim))


class _Holder(object):
    """A plain attribute holder that Keras' tracking does not look inside."""

    def __init__(self):
        self.tables = collections.OrderedDict()
        self.by_variable = {}
        self.pending = None        # gathered whole tables for a save, by key
        self.checked = False       # the ranks were found to describe the same tables


@keras.saving.register_keras_serializable(package="tf_hvd")
class DistributedEmbedding(keras.layers.Layer):
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
            if known is not None and _signature(known) != _signature(table):
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
        self._hvd = _Holder()
        self._table_configs = tables

    # -- building ------------------------------------------------------
    def build(self, input_shape=None):
        rank, size = _rank_size()
        holder = self._hvd
        for name, table in self._table_configs.items():
            state = _Table(table, RowLayout(table.vocabulary_size, size,
                                            table.sharding), rank)
            state.shard = self.add_weight(
                shape=state.local_shape(), initializer=_initializer_of(state),
                name=name, trainable=True, dtype=self.variable_dtype)
            mark_sharded_rows(state.shard, self)
            if table.optimizer is not None:
                import keras
                own = keras.optimizers.get(table.optimizer)
                state.own_optimizer = own.__class__.from_config(own.get_config())
                state.rule = rule_for(state.own_optimizer, name)
            holder.tables[name] = state
            holder.by_variable[var_key(state.shard)] = state
        self.built = True

    def compute_output_shape(self, input_shape):
        shapes = []
        flat_shapes = _flatten_shapes(input_shape, len(self._features))
        for (feature, table_name), shape in zip(self._features, flat_shapes):
            dim = int(self._table_configs[table_name].embedding_dim)
            batch = shape[0] if shape else None
            shapes.append((batch, dim))
        return tf.nest.pack_sequence_as(self.feature_configs, shapes)

    # -- the forward pass ----------------------------------------------
    def call(self, inputs, weights=None, training=None):
        rank, size = _rank_size()
        if not self._hvd.checked:
            self._check_ranks(size)
        flat_inputs = tf.nest.flatten(inputs, expand_composites=False)
        if len(flat_inputs) != len(self._features):
            raise ValueError(
                "DistributedEmbedding '%s' has %d features but was called with %d "
                "inputs" % (self.name, len(self._features), len(flat_inputs)))
        flat_weights = ([None] * len(flat_inputs) if weights is None
                        else tf.nest.flatten(weights, expand_composites=False))
        parsed = [_parse_feature(x, w) for x, w in zip(flat_inputs, flat_weights)]
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

    # -- the optimizer's side ------------------------------------------
    def table_for(self, variable):
        return self._hvd.by_variable.get(var_key(variable))

    def prepare_sparse_update(self, variable, optimizer):
        """Make ``optimizer``'s slots for the rows of ``variable`` (once per
        optimizer class); ShardingError if it cannot update rows."""
        state = self.table_for(variable)
        if state.own_optimizer is not None:
            rule_class = type(state.own_optimizer)
        else:
            rule_class = getattr(type(optimizer), "_hvd_base", type(optimizer))
            if state.rule_class is not rule_class:
                state.rule = rule_for(optimizer, state.name)
        if state.rule_class is rule_class:
            return state
        _make_slots(state, self.variable_dtype)
        state.rule_class = rule_class
        return state

    def apply_sparse_gradient(self, variable, grad, optimizer):
        """Apply ``grad`` (an IndexedSlices of local rows) to the table
        ``variable`` with the table's optimizer (its own, or ``optimizer``)."""
        state = self.prepare_sparse_update(variable, optimizer)
        stepper = state.own_optimizer or optimizer
        if not isinstance(grad, tf.IndexedSlices):
            grad = tf.convert_to_tensor(grad)
            grad = tf.IndexedSlices(grad, tf.range(tf.shape(grad)[0]))
        values = tf.cast(grad.values, variable.dtype)
        scale = getattr(optimizer, "loss_scale_factor", None)
        if scale is not None:
            values = values / scale
        clipvalue = getattr(stepper, "clipvalue", None)
        if clipvalue:
            values = tf.clip_by_value(values, -clipvalue, clipvalue)
        rows, position = tf.unique(tf.cast(grad.indices, tf.int32))
        summed = tf.math.unsorted_segment_sum(values, position, tf.shape(rows)[0])
        lr = tf.cast(stepper._get_current_learning_rate(), variable.dtype)
        state.rule.apply(state.shard, state.slots, rows, summed, lr,
                         tf.convert_to_tensor(stepper.iterations))
        if state.own_optimizer is not None:
            state.own_optimizer.iterations.assign_add(1)

    # -- whole tables ----------------------------------------------------
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
        if root_rank is not None and _rank_size()[1] > 1:
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
        rank, size = _rank_size()
        self._check_ranks(size)
        for state in self._hvd.tables.values():
            if state.layout.n == size and state.rank == rank:
                continue
            state.layout = RowLayout(state.config.vocabulary_size, size,
                                     state.config.sharding)
            state.rank = rank
            checkpoint.replace_shard(self, state)
            if state.rule_class is not None:
                _make_slots(state, self.variable_dtype)

    def get_config(self):
        config = super().get_config()
        config.update({
            "feature_configs": tf.nest.map_structure(lambda f: _feature_config(f),
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

        config["feature_configs"] = _map_feature_dicts(feature, config["feature_configs"])
        return cls(**config)



# the marker of a holder of sharded state (tf_hvd._keras.sharded_state.protocol)
setattr(DistributedEmbedding, SHARDED_STATE, True)


def _initializer_of(state):
    """The Keras initializer of ``state``'s shard: this rank's rows of the whole
    table, each row's value fixed by the seed and its id (not by the ranks)."""
    def initialize(shape, dtype=None):
        return initial_rows(state.config.initializer, state.layout.vocabulary_size,
                            state.config.embedding_dim,
                            state.layout.global_ids(state.rank), dtype)
    return initialize


def _feature_config(feature):
    table = config_lib.as_table_config(feature.table)
    return {"name": feature.name, "table": table.get_config(),
            "input_shape": config_lib.shape_list(getattr(feature, "input_shape", None)),
            "output_shape": config_lib.shape_list(getattr(feature, "output_shape", None)),
            "_feature": True}


def _map_feature_dicts(fn, structure):
    if isinstance(structure, dict) and structure.get("_feature"):
        c = dict(structure)
        c.pop("_feature")
        return fn(c)
    if isinstance(structure, dict):
        return {k: _map_feature_dicts(fn, v) for k, v in structure.items()}
    if isinstance(structure, (list, tuple)):
        return type(structure)(_map_feature_dicts(fn, v) for v in structure)
    return structure


def _flatten_shapes(input_shape, count):
    """The flat list of per-feature shapes in ``input_shape`` (a shape, or a
    structure of them)."""
    def is_shape(s):
        return isinstance(s, (tuple, list)) and all(
            d is None or isinstance(d, (int, np.integer)) for d in s)
    if is_shape(input_shape) and count == 1:
        return [tuple(input_shape)]
    out = []

    def walk(s):
        if is_shape(s):
            out.append(tuple(s))
        elif isinstance(s, dict):
            for k in sorted(s):
                walk(s[k])
        else:
            for v in s:
                walk(v)
    walk(input_shape)
    return out


def _signature(table):
    opt = table.optimizer
    opt_name = None if opt is None else (opt if isinstance(opt, str) else type(opt).__name__)
    return (int(table.vocabulary_size), int(table.embedding_dim), table.combiner,
            table.sharding, str(opt_name))


def check_same_tables(layer_name, tables, features, size):
    """Every rank must describe the same tables: ShardingError naming the table,
    the field and the ranks otherwise (a collective when ``size > 1``)."""
    mine = {"tables": [(name, _signature(t)) for name, t in tables.items()],
            "features": [(f.name, t) for f, t in features]}
    if size == 1:
        return
    everyone = allgather_object(mine, name="DistributedEmbedding.%s.tables" % layer_name)
    message = tables_mismatch(layer_name, everyone)
    if message:
        raise ShardingError(message)


_FIELDS = ("vocabulary_size", "embedding_dim", "combiner", "sharding", "optimizer")


def tables_mismatch(layer_name, everyone):
    """The message for tables that differ across ranks (``everyone[r]`` is rank
    r's description), or None."""
    def ranks(rs):
        return ("rank %d" % rs[0]) if len(rs) == 1 else "ranks " + ", ".join(map(str, rs))
    names = collections.OrderedDict()
    for r, desc in enumerate(everyone):
        names.setdefault(tuple(n for n, _ in desc["tables"]), []).append(r)
    if len(names) > 1:
        return ("DistributedEmbedding '%s': the tables differ across ranks: %s"
                % (layer_name, "; ".join("%s on %s" % (list(n), ranks(rs))
                                         for n, rs in names.items())))
    for i, (name, _) in enumerate(everyone[0]["tables"]):
        for f, field in enumerate(_FIELDS):
            seen = collections.OrderedDict()
            for r, desc in enumerate(everyone):
                seen.setdefault(desc["tables"][i][1][f], []).append(r)
            if len(seen) > 1:
                return ("DistributedEmbedding '%s': table '%s' differs across ranks: %s"
                        % (layer_name, name, " but ".join(
                            "%s=%r on %s" % (field, v, ranks(rs)) for v, rs in seen.items())))
    features = collections.OrderedDict()
    for r, desc in enumerate(everyone):
        features.setdefault(tuple(tuple(x) for x in desc["features"]), []).append(r)
    if len(features) > 1:
        return ("DistributedEmbedding '%s': the features differ across ranks: %s"
                % (layer_name, "; ".join("%s on %s" % (list(f), ranks(rs))
                                         for f, rs in features.items())))
    return None


def _make_slots(state, dtype):
    """New slot variables for ``state.rule`` (initial values, or this rank's
    rows of a loaded checkpoint)."""
    import keras
    shape = state.local_shape()
    slots = {}
    with tf.init_scope():
        for name in state.rule.slot_names:
            value = state.loaded_slots.pop(name, None)
            if value is None:
                value = np.full(shape, state.rule.initial(name), dtype=dtype)
            slot = keras.Variable(value, dtype=dtype, trainable=False,
                                  name="%s_%s" % (state.name, name))
            mark_sharded_rows(slot, sharded_rows_owner(state.shard))
            slots[name] = slot
        if state.loaded_iterations is not None and state.own_optimizer is not None:
            state.own_optimizer.iterations.assign(state.loaded_iterations)
            state.loaded_iterations = None
    state.slots = slots


class _Feature(object):
    """One feature's ids, flat, and how to turn their rows into its output."""

    def __init__(self, ids, kind, batch=None, segments=None, weights=None, shape=None):
        self.ids = ids
        self.kind = kind            # "one", "dense", "segments"
        self.batch = batch
        self.segments = segments
        self.weights = weights
        self.shape = shape

    def combine(self, rows, combiner, dtype):
        rows = tf.cast(rows, dtype)
        if self.kind == "one":
            return rows
        if self.kind == "dense":
            dim = tf.shape(rows)[-1]
            rows = tf.reshape(rows, tf.concat([self.shape, [dim]], 0))
            if self.weights is None:
                total = tf.reduce_sum(rows, axis=-2)
                if combiner == "sum":
                    return total
                k = tf.cast(self.shape[-1], dtype)
                return total / (k if combiner == "mean" else tf.sqrt(k))
            w = tf.cast(self.weights, dtype)
            total = tf.reduce_sum(rows * w[..., None], axis=-2)
            return _normalize(total, w, combiner, axis=-1)
        w = (tf.ones_like(self.segments, dtype=dtype) if self.weights is None
             else tf.cast(self.weights, dtype))
        total = tf.math.unsorted_segment_sum(rows * w[:, None], self.segments, self.batch)
        if combiner == "sum":
            return total
        if combiner == "mean":
            denom = tf.math.unsorted_segment_sum(w, self.segments, self.batch)
        else:
            denom = tf.sqrt(tf.math.unsorted_segment_sum(w * w, self.segments, self.batch))
        return tf.math.divide_no_nan(total, denom[:, None])


def _normalize(total, w, combiner, axis):
    if combiner == "sum":
        return total
    if combiner == "mean":
        return tf.math.divide_no_nan(total, tf.reduce_sum(w, axis=axis)[..., None])
    return tf.math.divide_no_nan(total, tf.sqrt(tf.reduce_sum(w * w, axis=axis))[..., None])


def _parse_feature(x, w):
    if isinstance(x, tf.RaggedTensor):
        ids = x.flat_values
        weights = None if w is None else (w.flat_values if isinstance(w, tf.RaggedTensor)
                                          else tf.reshape(w, [-1]))
        return _Feature(ids, "segments", batch=x.nrows(out_type=tf.int32),
                        segments=tf.cast(x.value_rowids(), tf.int32), weights=weights)
    if isinstance(x, tf.SparseTensor):
        weights = None if w is None else (w.values if isinstance(w, tf.SparseTensor)
                                          else tf.reshape(w, [-1]))
        return _Feature(x.values, "segments", batch=tf.cast(x.dense_shape[0], tf.int32),
                        segments=tf.cast(x.indices[:, 0], tf.int32), weights=weights)
    x = tf.convert_to_tensor(x)
    if x.shape.rank == 1:
        return _Feature(x, "one")
    if x.shape.rank == 2 and x.shape[-1] == 1 and w is None:
        return _Feature(tf.reshape(x, [-1]), "one")
    return _Feature(tf.reshape(x, [-1]), "dense", weights=w, shape=tf.shape(x))


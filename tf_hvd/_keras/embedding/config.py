"""The description of tables and features, with keras-rs' names and fields.

``TableConfig`` and ``FeatureConfig`` have the fields of ``keras_rs.layers``'
classes of those names (keras-rs 0.4), so a keras-rs model moves by changing
its import; keras-rs' own config objects are accepted as they are. Two things
are tf_hvd's: ``TableConfig.sharding`` (``"mod"`` or ``"range"``, sharded_state/row_layout.py)
and the default ``optimizer=None``, meaning "the optimizer that applies the
gradients" (keras-rs' default ``"adam"`` is honoured when given: that table is
then updated by its own Adam, as keras-rs does on TPU)::

    table = TableConfig("items", vocabulary_size=1000, embedding_dim=16)
    features = {"item": FeatureConfig("item", table, input_shape=(256, 1),
                                      output_shape=(256, 16))}
"""

import dataclasses
from typing import Any, Optional, Sequence

from tf_hvd._keras.sharded_state.row_layout import MODES

COMBINERS = ("sum", "mean", "sqrtn")


def _default_initializer():
    import keras
    return keras.initializers.VarianceScaling(mode="fan_out")


@dataclasses.dataclass
class TableConfig:
    """One embedding table: ``vocabulary_size`` rows of ``embedding_dim`` values.

    ``combiner`` reduces a multi-hot feature's rows (``"sum"``, ``"mean"``,
    ``"sqrtn"``); ``sharding`` says which rank holds which row (``"mod"``: row
    ``i`` on rank ``i % n``; ``"range"``: contiguous blocks); ``optimizer``
    (None: the one applying the gradients) updates the table's rows.
    ``placement``, ``max_ids_per_partition`` and ``max_unique_ids_per_partition``
    are keras-rs' TPU settings, kept so its configs carry over; they change
    nothing here.

        TableConfig("users", vocabulary_size=10**6, embedding_dim=64, sharding="range")
    """
    name: str
    vocabulary_size: int
    embedding_dim: int
    initializer: Any = dataclasses.field(default_factory=_default_initializer)
    optimizer: Any = None
    combiner: str = "mean"
    placement: str = "auto"
    max_ids_per_partition: int = 256
    max_unique_ids_per_partition: int = 256
    sharding: str = "mod"

    def get_config(self):
        import keras
        return {
            "name": self.name, "vocabulary_size": int(self.vocabulary_size),
            "embedding_dim": int(self.embedding_dim),
            "initializer": keras.saving.serialize_keras_object(
                keras.initializers.get(self.initializer)),
            "optimizer": (None if self.optimizer is None
                          else keras.saving.serialize_keras_object(self.optimizer)),
            "combiner": self.combiner, "placement": self.placement,
            "max_ids_per_partition": self.max_ids_per_partition,
            "max_unique_ids_per_partition": self.max_unique_ids_per_partition,
            "sharding": self.sharding,
        }

    @classmethod
    def from_config(cls, config):
        import keras
        config = dict(config)
        config["initializer"] = keras.saving.deserialize_keras_object(config["initializer"])
        if config.get("optimizer") is not None:
            config["optimizer"] = keras.saving.deserialize_keras_object(config["optimizer"])
        return cls(**config)


@dataclasses.dataclass
class FeatureConfig:
    """One input feature looked up in ``table``. ``input_shape`` and
    ``output_shape`` are keras-rs' (the first dimension the batch); they are
    checked only for their last dimension of the output (the table's width).

        FeatureConfig("clicked_items", table, input_shape=(256, None),
                      output_shape=(256, 16))
    """
    name: str
    table: TableConfig
    input_shape: Optional[Sequence[Any]] = None
    output_shape: Optional[Sequence[Any]] = None

    def get_config(self):
        return {"name": self.name, "table": as_table_config(self.table).get_config(),
                "input_shape": shape_list(self.input_shape),
                "output_shape": shape_list(self.output_shape)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["table"] = TableConfig.from_config(config["table"])
        return cls(**config)


def shape_list(shape):
    """``shape`` as a config holds it: a list of ints and Nones (None stays None).

        shape_list((256, None))   # [256, None]
    """
    return None if shape is None else [None if d is None else int(d) for d in shape]


def as_table_config(table, sharding=None):
    """A tf_hvd TableConfig for ``table`` (ours, keras-rs' or anything with
    the same fields); ``sharding`` overrides the table's own."""
    if isinstance(table, TableConfig) and sharding is None:
        return table
    fields = {}
    for f in dataclasses.fields(TableConfig):
        if hasattr(table, f.name):
            fields[f.name] = getattr(table, f.name)
    missing = [k for k in ("name", "vocabulary_size", "embedding_dim") if k not in fields]
    if missing:
        raise TypeError("a table config needs %s; got %r" % (", ".join(missing), table))
    if sharding is not None:
        fields["sharding"] = sharding
    config = TableConfig(**fields)
    check_table(config)
    return config


def check_table(table):
    """ValueError naming the table if a field is out of range."""
    if not table.name:
        raise ValueError("TableConfig needs a name")
    if int(table.vocabulary_size) < 1 or int(table.embedding_dim) < 1:
        raise ValueError("table '%s': vocabulary_size and embedding_dim must be >= 1, got "
                         "%r and %r" % (table.name, table.vocabulary_size, table.embedding_dim))
    if table.combiner not in COMBINERS:
        raise ValueError("table '%s': combiner must be one of %s, got %r"
                         % (table.name, ", ".join(COMBINERS), table.combiner))
    if table.sharding not in MODES:
        raise ValueError("table '%s': sharding must be one of %s, got %r"
                         % (table.name, ", ".join(MODES), table.sharding))

"""One DistributedEmbedding table's state on this rank (its shard of rows, the
optimizer slots for those rows, the rule that updates them) and how the shard and
slots are made.

    state = Table(config, RowLayout(config.vocabulary_size, size, "mod"), rank)
    state.local_shape()                # (rows this rank holds, embedding_dim)
    initializer = initializer_of(state)
    make_slots(state, "float32")       # once state.rule is set
"""

import collections

import keras
import numpy as np
import tensorflow as tf

from tf_hvd._keras.sharded_state.initial_rows import initial_rows
from tf_hvd.sharded_rows import mark_sharded_rows, sharded_rows_owner


class Table(object):
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


class TableHolder(object):
    """A plain attribute holder that Keras' tracking does not look inside."""

    def __init__(self):
        self.tables = collections.OrderedDict()
        self.by_variable = {}
        self.pending = None        # gathered whole tables for a save, by key
        self.checked = False       # the ranks were found to describe the same tables


def initializer_of(state):
    """The Keras initializer of ``state``'s shard: this rank's rows of the whole
    table, each row's value fixed by the seed and its id (not by the ranks)."""
    def initialize(shape, dtype=None):
        return initial_rows(state.config.initializer, state.layout.vocabulary_size,
                            state.config.embedding_dim,
                            state.layout.global_ids(state.rank), dtype)
    return initialize


def make_slots(state, dtype):
    """New slot variables for ``state.rule`` (initial values, or this rank's
    rows of a loaded checkpoint)."""
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

"""Saving and loading DistributedEmbedding tables, whole or by rank.

Two ways, for two sizes of table:

* **whole tables in the Keras file** (``tf_hvd.keras.save_model``): every rank
  sends its rows (and the slots of the optimizer updating them) to the saving
  rank with one alltoall per variable (a gather: only that rank receives), which
  writes each table as one ``[vocabulary_size, dim]`` array in global row order.
  Plain Keras loads the file in one process; at any number of ranks each rank
  takes its rows of it (``load_own_variables``).
* **each rank writes its own rows** (``save_shards`` / ``load_shards``), for
  tables larger than one rank's memory: each save is a new step of the commit
  protocol (tf_hvd.checkpoint) under the directory, in which rank ``q`` of ``n``
  writes, per table, ``<layer>/<table>.ids.<q>-of-<n>.npy`` (the global ids of its
  rows) and ``<layer>/<table>.<what>.<q>-of-<n>.npy`` (the rows of the table and of
  each slot), and rank 0 publishes the step (its manifest last, with each file's size
  and CRC-32). Nothing is gathered. Loading at any number of ranks takes the newest
  complete step, checks each file, memory-maps it and copies only the rows the rank
  owns in its new layout, so a rank never holds more than its own rows (plus the
  8-byte ids). ``write_shards`` / ``read_shards`` do the files of one step for a
  caller that commits more than the tables in it.

    checkpoint.save_shards(model, "ckpt/tables")     # every rank, any np
    checkpoint.load_shards(model, "ckpt/tables")     # every rank, any np
"""

import json
import os

import numpy as np
import tensorflow as tf

from tf_hvd import functions, ops
from tf_hvd._keras import ranks
from tf_hvd._keras.state import var_key
from tf_hvd.checkpoint import (Step, StepWriter, complete_steps, new_token,
                               publish)
from tf_hvd.checkpoint.steps import MANIFEST
from tf_hvd.exceptions import CheckpointError, CheckpointSaveError, ShardingError
from tf_hvd.sharded_rows import mark_sharded_rows, sharded_rows_layers


def rows_of(full, layout, rank, table_name):
    """Rank ``rank``'s rows of the whole table ``full`` (an array or an h5py
    dataset: only those rows are read)."""
    expected = layout.vocabulary_size
    if full.shape[0] != expected:
        raise ShardingError(
            "DistributedEmbedding table '%s': the saved table has %d rows, the layer's "
            "vocabulary_size is %d" % (table_name, full.shape[0], expected))
    return layout.rows_of(full, rank)


def gather_rows(variable, layout, root_rank, name):
    """The whole table from every rank's rows (a collective): on ``root_rank``
    (None: on every rank) a numpy array in global row order, None elsewhere."""
    rank, size = ranks.rank_size()
    value = tf.convert_to_tensor(variable)
    if size == 1:
        return value.numpy()
    if root_rank is None:
        gathered = ops.allgather(value, name="DistributedEmbedding.gather." + name)
    else:
        splits = [0] * size
        splits[int(root_rank)] = int(value.shape[0])
        gathered, _ = ops.alltoall(value, splits=splits,
                                   name="DistributedEmbedding.gather." + name)
        if rank != int(root_rank):
            return None
    gathered = gathered.numpy()
    full = np.empty((layout.vocabulary_size,) + gathered.shape[1:], dtype=gathered.dtype)
    full[np.concatenate([layout.global_ids(q) for q in range(size)])] = gathered
    return full


def _keys(state):
    out = [("table:%s" % state.name, state.shard)]
    for slot_name in sorted(state.slots):
        out.append(("slot:%s:%s" % (state.name, slot_name), state.slots[slot_name]))
    return out


def gather_layer(layer, root_rank):
    """{store key: whole array} of every table and slot on ``root_rank``, None
    elsewhere (a collective)."""
    rank, _ = ranks.rank_size()
    values = {}
    for state in layer._hvd.tables.values():
        for key, variable in _keys(state):
            values[key] = gather_rows(variable, state.layout, root_rank,
                                      "%s.%s" % (layer.name, key))
        if state.own_optimizer is not None:
            values["iterations:%s" % state.name] = np.asarray(
                int(state.own_optimizer.iterations.numpy()), dtype=np.int64)
    return values if root_rank is None or rank == int(root_rank) else None


def load_whole(layer, values):
    """Give each table and slot this rank's rows of ``values`` (as gather_layer
    returns them), in the layer's current layout."""
    for state in layer._hvd.tables.values():
        for key, value in values.items():
            parts = key.split(":")
            if parts[1] != state.name:
                continue
            if parts[0] == "iterations":
                if state.own_optimizer is not None:
                    state.own_optimizer.iterations.assign(int(value))
                continue
            what = "table" if parts[0] == "table" else parts[2]
            set_rows(state, what, rows_of(value, state.layout, state.rank, state.name))


def save_layer(layer, store):
    """``layer.save_own_variables``: whole tables (gathered first at np > 1)."""
    _, size = ranks.rank_size()
    pending, layer._hvd.pending = layer._hvd.pending, None
    if size == 1:
        pending = gather_layer(layer, 0)
    if pending is None:
        raise ShardingError(
            "DistributedEmbedding '%s' holds 1/%d of each table on each rank: save with "
            "tf_hvd.keras.save_model(model, path) on every rank (it gathers the tables to "
            "the saving rank), or write each rank's rows with "
            "tf_hvd.keras.layers.save_embedding_shards" % (layer.name, size))
    for key, value in pending.items():
        store[key] = value


def load_layer(layer, store):
    """``layer.load_own_variables``: each rank keeps its rows of the whole tables."""
    keys = set(store.keys())
    for state in layer._hvd.tables.values():
        key = "table:%s" % state.name
        if key not in keys:
            raise ShardingError("DistributedEmbedding '%s': the checkpoint has no table "
                                "'%s' (it has %s)" % (layer.name, state.name,
                                                      ", ".join(sorted(keys))))
        set_rows(state, "table", rows_of(store[key], state.layout, state.rank, state.name))
        prefix = "slot:%s:" % state.name
        for k in keys:
            if k.startswith(prefix):
                set_rows(state, k[len(prefix):],
                         rows_of(store[k], state.layout, state.rank, state.name))
        it = "iterations:%s" % state.name
        if it in keys and state.own_optimizer is not None:
            state.own_optimizer.iterations.assign(int(np.asarray(store[it])))


def set_rows(state, what, rows):
    """Give this rank's ``rows`` to the table (``what == "table"``) or to a slot
    (kept until the optimizer makes its slots, if it has not yet)."""
    if what == "table":
        state.shard.assign(rows)
    elif what in state.slots:
        state.slots[what].assign(rows)
    else:
        state.loaded_slots[what] = rows


def replace_shard(layer, state):
    """A new shard variable of this rank's size in the new layout (elastic
    re-sharding), put where the old one was in the layer's weights."""
    import keras
    old = state.shard
    with tf.init_scope():
        new = keras.Variable(np.zeros(state.local_shape(), dtype=old.dtype),
                             dtype=old.dtype, trainable=True, name=state.name)
    mark_sharded_rows(new, layer)
    tracked = layer._trainable_variables
    for i, v in enumerate(tracked):
        if v is old:
            tracked[i] = new
    holder = layer._hvd
    holder.by_variable = dict((k, s) for k, s in holder.by_variable.items() if s is not state)
    holder.by_variable[var_key(new)] = state
    state.shard = new


# -- each rank writes its rows ------------------------------------------------
def _layers(model):
    return sharded_rows_layers(model)


def _suffix(rank, size):
    return "%d-of-%d.npy" % (rank, size)


def _join(*parts):
    return "/".join(p.strip("/") for p in parts if p)


def write_shards(model, writer, prefix=""):
    """This rank's rows of every DistributedEmbedding table of ``model`` (and of their
    slots) written through ``writer`` (a tf_hvd.checkpoint.StepWriter) under the
    folder ``prefix`` of its step: per table ``<prefix>/<layer>/<table>.ids.<q>-of-<n>.npy``
    (the rows' global ids) and ``<table>.<what>.<q>-of-<n>.npy`` (``what``: "table" or a
    slot's name). Returns the meta that ``read_shards`` needs (the same on every rank:
    size, and per layer and table vocabulary_size, embedding_dim and what was saved);
    the caller finishes the writer and publishes::

        meta = write_shards(model, writer, "embedding")
        writer.finish()
        ...
        read_shards(model, Step.newest(root), "embedding", meta)
    """
    rank, size = ranks.rank_size()
    meta = {"size": size, "layers": {}}
    for layer in _layers(model):
        tables = {}
        for state in layer._hvd.tables.values():
            base = _join(prefix, layer.name, state.name)
            writer.write_array("%s.ids.%s" % (base, _suffix(rank, size)),
                               state.layout.global_ids(rank))
            whats = []
            for key, variable in _keys(state):
                what = "table" if key.startswith("table:") else key.split(":")[2]
                writer.write_array("%s.%s.%s" % (base, what, _suffix(rank, size)),
                                   tf.convert_to_tensor(variable).numpy())
                whats.append(what)
            tables[state.name] = {"vocabulary_size": state.layout.vocabulary_size,
                                  "embedding_dim": int(state.config.embedding_dim),
                                  "saved": whats}
        meta["layers"][layer.name] = tables
    return meta


def read_shards(model, step, prefix, meta):
    """Every rank reads, from the files ``write_shards`` wrote under ``prefix`` of
    ``step`` (a tf_hvd.checkpoint.Step) at any number of ranks, the rows it owns now.
    Each file is checked against the step's manifest first (``step.verify``: a
    truncated or corrupted file is a CheckpointError naming it); the rows are then
    memory-mapped, so only this rank's rows are copied::

        step = Step.newest(root)
        read_shards(model, step, "embedding", step.meta["embedding"])
    """
    _load_rows(model, meta, lambda name: step.verify(_join(prefix, name)),
               "%s (step %d)" % (step.directory, step.step))


def _load_rows(model, manifest, path_of, where):
    # path_of(relative name) -> a readable path (verified first where it can be)
    rank, _ = ranks.rank_size()
    saved_size = int(manifest["size"])
    for layer in _layers(model):
        tables = manifest["layers"].get(layer.name)
        if tables is None:
            raise ShardingError("load_embedding_shards: %s has no layer '%s' (it has %s)"
                                % (where, layer.name,
                                   ", ".join(sorted(manifest["layers"])) or "none"))
        for state in layer._hvd.tables.values():
            info = tables.get(state.name)
            if info is None or info["vocabulary_size"] != state.layout.vocabulary_size \
                    or info["embedding_dim"] != int(state.config.embedding_dim):
                raise ShardingError(
                    "load_embedding_shards: table '%s' of layer '%s' is %s in %s, the "
                    "layer's is %d x %d" % (state.name, layer.name,
                                            "missing" if info is None else "%d x %d" % (
                                                info["vocabulary_size"],
                                                info["embedding_dim"]),
                                            where, state.layout.vocabulary_size,
                                            int(state.config.embedding_dim)))
            base = _join(layer.name, state.name)
            shape = state.local_shape()
            out = dict((what, None) for what in info["saved"])
            for q in range(saved_size):
                suffix = _suffix(q, saved_size)
                ids = np.load(path_of("%s.ids.%s" % (base, suffix)), mmap_mode="r")
                mine = np.nonzero(state.layout.owner(ids) == rank)[0]
                local = state.layout.local_row(np.asarray(ids[mine]))
                for what in out:
                    rows = np.load(path_of("%s.%s.%s" % (base, what, suffix)), mmap_mode="r")
                    if out[what] is None:
                        out[what] = np.zeros(shape, dtype=rows.dtype)
                    out[what][local] = rows[mine]
            for what, rows in out.items():
                set_rows(state, what, rows)


def _on_rank0(fn, name, error_type):
    """``fn()`` on rank 0, its result (or its failure) on every rank: the ranks agree
    without one of them waiting for a collective the others never reach."""
    rank, size = ranks.rank_size()
    outcome = None
    if rank == 0:
        try:
            outcome = ("ok", fn())
        except Exception as e:  # noqa: BLE001 - sent to every rank, then raised
            failure = e
            outcome = ("error", "%s: %s" % (type(e).__name__, e))
    if size > 1:
        outcome = functions.broadcast_object(outcome, root_rank=0, name=name)
    if outcome[0] == "error":
        if rank == 0:
            raise failure
        raise error_type("on rank 0: %s" % outcome[1])
    return outcome[1]


def save_shards(model, directory, keep=2, step=None):
    """Every rank writes the rows it holds of every DistributedEmbedding table of
    ``model`` (and their slots) as a new checkpoint step under ``directory``;
    nothing is gathered. Call on every rank: rank 0 picks the step (``step``, or
    one past the newest) and publishes it (tf_hvd.checkpoint: manifest last, the
    step renamed into place) once every rank's files are synced; the ``keep``
    newest steps stay. When it returns on any rank, the step is published; a rank
    that cannot write (a full disk, no permission) fails the save on every rank with
    CheckpointSaveError, and the previous step stays::

        save_shards(model, "ckpt/tables")     # every rank, any np
    """
    rank, size = ranks.rank_size()
    directory = str(directory)

    def draw():
        try:
            newest = complete_steps(directory)
        except OSError as e:   # e.g. a path under a file: the same error on every rank
            raise CheckpointSaveError("save_embedding_shards: cannot save under %s (%s)"
                                      % (directory, e.strerror or e))
        return (int(step) if step is not None else (newest[-1] + 1 if newest else 0),
                new_token())
    number, token = _on_rank0(draw, "DistributedEmbedding.save_shards.step",
                              CheckpointSaveError)
    error, meta = None, None
    try:
        writer = StepWriter(directory, number, rank, size, token)
        try:
            meta = write_shards(model, writer, "")
            writer.finish()
        except Exception as e:
            writer.fail(e)
            raise
    except Exception as e:  # noqa: BLE001 - every rank learns of it below
        error = e
    # a collective, so that every rank fails the save when one rank's part failed
    errors = (functions.allgather_object(None if error is None else str(error),
                                         name="DistributedEmbedding.save_shards.written")
              if size > 1 else [None if error is None else str(error)])
    if error is not None:
        raise error
    failed = [(q, e) for q, e in enumerate(errors) if e is not None]
    if failed:
        raise CheckpointSaveError("save_embedding_shards: step %d under %s is not published: "
                                  % (number, directory) + "; ".join(
                                      "rank %d: %s" % (q, e) for q, e in failed))
    _on_rank0(lambda: publish(directory, number, size, token, meta=meta, keep=keep),
              "DistributedEmbedding.save_shards.published", CheckpointSaveError)


def load_shards(model, directory):
    """Every rank reads, from what ``save_shards`` wrote at any number of ranks, the
    rows it owns now (memory-mapped: only those rows are read), from the newest
    complete step (the same on every rank; a half-written newer one is ignored with
    a warning). Each file's size and CRC-32 are checked first (CheckpointError names
    a truncated or corrupted file). A directory of the earlier layout (manifest.json
    and the files directly in it) is read as it is::

        load_shards(model, "ckpt/tables")     # every rank, any np
    """
    directory = str(directory)

    def find():
        step = Step.newest(directory)
        if step is not None:
            return step.step
        if os.path.isfile(os.path.join(directory, MANIFEST)):
            return None
        raise CheckpointError("load_embedding_shards: %s holds no complete checkpoint "
                              "step (and no manifest.json)" % directory)
    number = _on_rank0(find, "DistributedEmbedding.load_shards.step", CheckpointError)
    if number is None:
        with open(os.path.join(directory, MANIFEST)) as f:
            manifest = json.load(f)
        _load_rows(model, manifest, lambda name: os.path.join(directory, *name.split("/")),
                   directory)
        return
    step = Step(directory, number)
    read_shards(model, step, "", step.meta)

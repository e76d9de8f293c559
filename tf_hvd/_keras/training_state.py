"""What a checkpoint step holds of a Keras model, and putting it back.

The saving rank writes ``model.npz``: every variable of ``model.variables`` (weights,
non-trainable statistics and the layers' random seed states) except the rows of sharded
embedding tables, under ``model/<index>``, and the optimizer's state in the form an
unsharded optimizer of the same class holds it (a sharded DistributedOptimizer, a holder
of sharded state, gathers its whole state first: tf_hvd._keras.sharded_state.protocol),
under ``optimizer/<index>``; their names and shapes go into the
manifest. The tables' rows are written by the ranks that hold them (the embedding
checkpoint's files, under ``embeddings/``). So a step loads at any number of ranks, into
a sharded or an unsharded optimizer::

    arrays, meta = gather(model, optimizer, root_rank=0)   # every rank (a collective)
    ...                                                    # root writes arrays
    load(step, model, optimizer)                           # every rank, any np
"""

import numpy as np
import tensorflow as tf

from tf_hvd._keras import flavors
from tf_hvd._keras.embedding import checkpoint as embedding_checkpoint
from tf_hvd.exceptions import CheckpointError, ShardingError
from tf_hvd.sharded_rows import holds_sharded_state, is_sharded_rows, sharded_rows_layers

MODEL_FILE = "model.npz"
EMBEDDINGS = "embeddings"


def _name(v):
    return getattr(v, "path", None) or v.name


def model_variables(model):
    """The model's variables a step holds whole (not the rows of sharded tables)."""
    return [v for v in model.variables if not is_sharded_rows(v)]


def build_optimizer(model, optimizer):
    """Create the optimizer's state now (a collective for a sharded one), so that it
    can be saved or loaded before the first step, and so that a rank that has not
    trained yet (one joining an elastic job) holds the same variables as the others
    (tf_hvd.elastic's TensorFlowKerasState.sync calls it too)::

        build_optimizer(model, model.optimizer)   # no-op once built
    """
    if optimizer is None or isinstance(optimizer, str) or flavors.optimizer_built(optimizer):
        return
    trainable = list(model.trainable_variables)
    if not trainable:
        return
    if flavors.optimizer_kind(optimizer) == flavors.TF_KERAS_LEGACY:
        optimizer._create_all_weights(trainable)
    else:
        optimizer.build(trainable)


def gather(model, optimizer, rank, root_rank=0):
    """({key: array}, meta) of the model and optimizer on ``root_rank`` (None, None
    elsewhere). Every rank calls it: a sharded optimizer gathers its slots."""
    build_optimizer(model, optimizer)
    if holds_sharded_state(optimizer):   # the whole state, as one process holds it
        opt_values = optimizer.gather_whole(root_rank)
        opt_names = ["slot %d" % i for i in range(len(opt_values or []))]
    elif rank != int(root_rank):  # nothing to gather: only the root reads its state
        return None, None
    elif optimizer is not None:
        variables = flavors.optimizer_variables(optimizer)
        opt_values = [v.numpy() for v in variables]
        opt_names = [_name(v) for v in variables]
    else:
        opt_values, opt_names = [], []
    if rank != int(root_rank):
        return None, None
    variables = model_variables(model)
    arrays = {}
    for i, v in enumerate(variables):
        arrays["model/%05d" % i] = np.asarray(tf.convert_to_tensor(v))
    for i, value in enumerate(opt_values):
        arrays["optimizer/%05d" % i] = np.asarray(value)
    for layer in sharded_rows_layers(model):  # the tables' own optimizers' step counts
        for table, steps in layer.own_steps().items():
            arrays["iterations/%s/%s" % (layer.name, table)] = np.asarray(steps,
                                                                         dtype=np.int64)
    meta = {"model_variables": [[_name(v), list(arrays["model/%05d" % i].shape)]
                                for i, v in enumerate(variables)],
            "optimizer": None if optimizer is None else type(optimizer).__name__,
            "optimizer_variables": opt_names}
    return arrays, meta


def write_tables(model, writer):
    """This rank's rows of the model's DistributedEmbedding tables into the step."""
    if not sharded_rows_layers(model):
        return None
    return embedding_checkpoint.write_shards(model, writer, EMBEDDINGS)


def _differences(path, saved, wanted):
    saved_names = [n for n, _ in saved]
    wanted_names = [n for n, _ in wanted]
    missing = [n for n in wanted_names if n not in saved_names]
    extra = [n for n in saved_names if n not in wanted_names]
    parts = []
    if missing:
        parts.append("missing %s" % ", ".join(missing))
    if extra:
        parts.append("extra %s" % ", ".join(extra))
    if not parts:
        for (n, s), (_, w) in zip(saved, wanted):
            if list(s) != list(w):
                parts.append("variable %s is %s there, %s in the model" % (n, tuple(s),
                                                                         tuple(w)))
                break
    if not parts:
        parts.append("%d variables saved, the model has %d" % (len(saved), len(wanted)))
    return ("checkpoint file %s does not match the model (%s): %s"
            % (path, "a checkpoint of another model?", "; ".join(parts)))


def load(step, model, optimizer):
    """Put the step's model, optimizer and table state into ``model`` (every rank)."""
    path = step.verify(MODEL_FILE)
    meta = step.meta
    variables = model_variables(model)
    wanted = [[_name(v), list(v.shape)] for v in variables]
    saved = meta.get("model_variables", [])
    if len(saved) != len(wanted) or any(list(s[1]) != w[1] for s, w in zip(saved, wanted)):
        raise CheckpointError(_differences(path, saved, wanted))
    with np.load(path) as data:
        for i, v in enumerate(variables):
            v.assign(data["model/%05d" % i])
        opt_values = [data["optimizer/%05d" % i]
                      for i in range(len(meta.get("optimizer_variables", [])))]
        for layer in sharded_rows_layers(model):
            keys = dict((table, "iterations/%s/%s" % (layer.name, table))
                        for table in layer.own_steps())
            layer.load_own_steps(dict((table, int(data[key])) for table, key in keys.items()
                                      if key in data.files))
    if optimizer is not None:
        build_optimizer(model, optimizer)
        _load_optimizer(path, meta, optimizer, opt_values)
    tables = meta.get("tables")
    if sharded_rows_layers(model):
        if tables is None:
            raise CheckpointError("checkpoint step %s has no embedding tables, the model "
                                  "has DistributedEmbedding layers %s"
                                  % (step.directory, ", ".join(
                                      l.name for l in sharded_rows_layers(model))))
        embedding_checkpoint.read_shards(model, step, EMBEDDINGS, tables)


def _load_optimizer(path, meta, optimizer, values):
    if holds_sharded_state(optimizer):   # this rank's part of the whole state
        try:
            optimizer.load_whole(values)
        except ShardingError as e:
            raise CheckpointError("checkpoint file %s: %s" % (path, e))
        return
    variables = flavors.optimizer_variables(optimizer)
    names = meta.get("optimizer_variables", [])
    wanted = [[_name(v), list(v.shape)] for v in variables]
    saved = [[n, list(np.shape(x))] for n, x in zip(names, values)]
    if len(values) != len(variables) or any(s[1] != w[1] for s, w in zip(saved, wanted)):
        first = next(((s, w) for s, w in zip(saved, wanted) if s[1] != w[1]), None)
        raise CheckpointError(
            "checkpoint file %s holds the state of optimizer %s (%d variables), the "
            "model's optimizer is %s with %d%s" % (
                path, meta.get("optimizer"), len(values), type(optimizer).__name__,
                len(variables), "" if first is None else
                " (the first that differs: %s %s there, %s %s here)" % (
                    first[0][0], tuple(first[0][1]), first[1][0], tuple(first[1][1]))))
    for v, x in zip(variables, values):
        v.assign(x)

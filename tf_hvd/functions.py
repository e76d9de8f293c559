"""Helpers built on the collectives: broadcasting variables and Python objects.

``broadcast_variables`` works with ``tf.Variable`` and Keras 3 variables
(``keras.Variable``), which are not ``tf.Variable`` subclasses: a variable is
read with ``tf.convert_to_tensor`` and written with ``.assign``, nothing else
is assumed.
"""

import pickle

import cloudpickle
import numpy as np
import tensorflow as tf

from tf_hvd.ops.naming import noname
from tf_hvd.ops.raw import raw_allgather, raw_broadcast
from tf_hvd.process_sets import registered_set_id
from tf_hvd.sharded_rows import is_sharded_rows
from tf_hvd.topology import check_initialized, rank

# ---------------------------------------------------------------------------
# Variables


# Dtypes the broadcast op takes; variables of other numeric dtypes (uint32 RNG
# states, complex, ...) travel as their bytes.
_OP_DTYPES = frozenset([tf.uint8, tf.int8, tf.uint16, tf.int16, tf.int32, tf.int64,
                        tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.bool])


def _broadcast_value(value, root_rank, name=None, process_set_id=0, require_init=True):
    if value.dtype in _OP_DTYPES:
        return raw_broadcast(value, root_rank, name=name, process_set_id=process_set_id,
                             require_init=require_init)
    raw = raw_broadcast(tf.bitcast(value, tf.uint8), root_rank, name=name,
                        process_set_id=process_set_id, require_init=require_init)
    return tf.bitcast(raw, value.dtype)


def _broadcast_values(values, root_rank, name=None, process_set_id=0):
    return [_broadcast_value(v, root_rank, None if name is None else "%s_%d" % (name, i),
                             process_set_id)
            for i, v in enumerate(values)]


# Eagerly, the broadcasts run inside one tf.function so that they are submitted
# together (negotiated and fused in a few cycles instead of one round each).
# Its inputs are the variables' values, so one trace serves every call with the
# same shapes/dtypes/root.
_broadcast_values_fn = tf.function(_broadcast_values, autograph=False,
                                   reduce_retracing=False)


def broadcast_variables(variables, root_rank, process_set=None, inplace=False):
    """Sets every variable to its value on ``root_rank``.

    Args:
      variables: an iterable of tf.Variable / keras.Variable, in the same order
        on every rank (e.g. ``model.variables``).
      root_rank: the rank whose values are kept (a global rank).
      process_set: only this hvd.ProcessSet's ranks take part (default: all).
      inplace: as in Horovod, use :func:`broadcast_` (the variables are
        updated in place either way here; the result is the same).

    Returns:
      Eagerly: None (the variables are updated when it returns). In a graph
      (TF1 or tf.function): the op that performs the update.

    Example:

    ```pycon
    >>> hvd.init()
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    >>> hvd.broadcast_variables(model.variables, root_rank=0)  # rank 0's weights everywhere
    >>> [tuple(v.shape) for v in model.variables]
    [(3, 2), (2,)]

    ```
    """
    check_initialized()
    set_id = registered_set_id(process_set)
    # Variables holding this rank's rows of a sharded table differ on purpose.
    variables = [v for v in variables if not is_sharded_rows(v)]
    if inplace:
        values = broadcast_(variables, root_rank, process_set=process_set)
        if tf.executing_eagerly():
            return None
        return tf.group(*values, name="broadcast_variables")
    return _update_from_root(list(variables), root_rank, None, set_id)


def _update_from_root(variables, root_rank, name, set_id=0, require_init=True):
    """Assigns root's values; eagerly returns None, in a graph the update op
    (built without hvd.init() when ``require_init`` is False)."""
    if tf.executing_eagerly():
        if not variables:
            return None
        values = [tf.convert_to_tensor(v) for v in variables]
        new_values = _broadcast_values_fn(values, int(root_rank), name, set_id)
        for var, value in zip(variables, new_values):
            var.assign(value)
        return None
    if not variables:
        return tf.no_op(name="broadcast_variables")
    updates = []
    for i, var in enumerate(variables):
        value = _broadcast_value(tf.convert_to_tensor(var), root_rank,
                                 None if name is None else "%s_%d" % (name, i), set_id,
                                 require_init)
        updates.append(_as_op(var.assign(value)))
    return tf.group(*[u for u in updates if u is not None], name="broadcast_variables")


def broadcast_(variables, root_rank, name=None, process_set=None):
    """In-place broadcast (Horovod's ``broadcast_``): sets every variable to its
    value on ``root_rank`` and returns the variables' new values.

    Works eagerly, in tf.function and in TF1 graphs, on tf.Variable and Keras
    variables (Horovod's needs resource or reference variables of one kind)::

        new_values = hvd.broadcast_([w, b], root_rank=0)

    Returns:
      A list of tensors: the updated values (in a graph they are read after
      the update).
    """
    check_initialized()
    set_id = registered_set_id(process_set)
    variables = list(variables)
    update = _update_from_root(variables, root_rank, name, set_id)
    deps = [] if update is None else [update]
    with tf.control_dependencies(deps):
        return [tf.identity(tf.convert_to_tensor(v)) for v in variables]


def _as_op(update):
    """The tf.Operation behind what ``assign`` returned (tensor, op, variable or None)."""
    if update is None or isinstance(update, tf.Operation):
        return update
    op = getattr(update, "op", None)
    return op if isinstance(op, tf.Operation) else None


def broadcast_global_variables(root_rank):
    """TF1 graph mode: the op that broadcasts all global variables from ``root_rank``.

    Eagerly there is no global variable collection: RuntimeError (before any
    other check), use
    ``hvd.broadcast_variables(model.variables + optimizer.variables, root_rank)``.
    As in Horovod, the graph op may be built before ``hvd.init()``; running it
    needs init::

        with tf.Graph().as_default():
            w = tf.compat.v1.get_variable("w", initializer=[1.0])
            bcast = hvd.broadcast_global_variables(0)
            hvd.init()
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.global_variables_initializer())
                session.run(bcast)
    """
    if tf.executing_eagerly():
        raise RuntimeError(
            "hvd.broadcast_global_variables() does not support eager execution; use "
            "hvd.broadcast_variables(<model/optimizer variables>, root_rank) instead.")
    return _update_from_root(tf.compat.v1.global_variables(), root_rank, None,
                             require_init=False)


# ---------------------------------------------------------------------------
# Python objects (pickled into uint8 tensors)


def _to_bytes_tensor(obj):
    # cloudpickle, as Horovod: lambdas, closures and classes defined in a function
    # go by value (its output loads with plain pickle where cloudpickle is importable).
    data = cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return np.frombuffer(data, dtype=np.uint8)


def _outside_functions(fn):
    """Runs ``fn(evaluate)`` eagerly or, in TF1 graph mode, in a private graph.

    ``evaluate(tensors)`` returns numpy values. In TF1 graph mode each call
    builds its ops in a fresh graph run by its own session, so it works even
    when the user's graph is finalized (MonitoredTrainingSession).
    """
    with tf.init_scope():
        if tf.executing_eagerly():
            return fn(lambda tensors: [t.numpy() for t in tensors])
        graph = tf.Graph()
        with graph.as_default():
            with tf.compat.v1.Session(graph=graph) as session:
                return fn(session.run)


def broadcast_object(obj, root_rank=0, session=None, name=None, process_set=None):
    """Returns the Python object ``obj`` of ``root_rank`` on every rank.

    The object is serialized with cloudpickle, as in Horovod (lambdas, closures
    and classes defined in a function work); other ranks may pass anything
    (e.g. None). Works eagerly and in
    TF1 graph mode; ``session`` is accepted for compatibility and not needed.
    Inside a tf.function it runs once, when the function is traced.
    With ``process_set``, only its ranks take part (``root_rank`` is global).
    """
    check_initialized()
    set_id = registered_set_id(process_set)
    root_rank = int(root_rank)
    if name is None:
        name = noname("broadcast_object")

    def run(evaluate):
        if rank() == root_rank:
            payload = _to_bytes_tensor(obj)
        else:
            payload = np.zeros([0], dtype=np.uint8)
        length = raw_broadcast(tf.constant([payload.size], dtype=tf.int64), root_rank,
                               name=name + ".size", process_set_id=set_id)
        (length,) = evaluate([length])
        if rank() != root_rank:
            payload = np.zeros([int(length[0])], dtype=np.uint8)
        data = raw_broadcast(tf.constant(payload), root_rank, name=name + ".data",
                             process_set_id=set_id)
        (data,) = evaluate([data])
        return pickle.loads(data.tobytes())

    return _outside_functions(run)


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=None):
    """Horovod's ``broadcast_object_fn``: returns ``fn(obj)`` that broadcasts a
    Python object from ``root_rank`` each time it is called.

    Horovod builds placeholders for a TF1 session; here ``fn`` works in TF1
    graph mode and eagerly alike (``session`` is accepted, not needed)::

        bcast = hvd.broadcast_object_fn(root_rank=0)
        config = bcast(config if hvd.rank() == 0 else None)
    """
    check_initialized()
    registered_set_id(process_set)  # checks it now
    name = name or "broadcast_object_fn"

    def _bcast(obj):
        return broadcast_object(obj, root_rank=root_rank, session=session, name=name,
                                process_set=process_set)
    return _bcast


def allgather_object(obj, session=None, name=None, process_set=None):
    """Returns the list of every rank's Python object ``obj``, in rank order.

    Objects are serialized with cloudpickle, as in Horovod. Works eagerly and in TF1
    graph mode (``session`` is accepted for compatibility and not needed).
    With ``process_set``, the objects of its ranks, in their order.
    """
    check_initialized()
    set_id = registered_set_id(process_set)
    if name is None:
        name = noname("allgather_object")

    def run(evaluate):
        payload = _to_bytes_tensor(obj)
        lengths = raw_allgather(tf.constant([payload.size], dtype=tf.int64),
                                name=name + ".size", process_set_id=set_id)
        data = raw_allgather(tf.constant(payload), name=name + ".data", process_set_id=set_id)
        lengths, data = evaluate([lengths, data])
        objects, start = [], 0
        for n in lengths.tolist():
            objects.append(pickle.loads(data[start:start + n].tobytes()))
            start += n
        return objects

    return _outside_functions(run)

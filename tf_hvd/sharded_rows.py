"""Variables whose rows are split over the ranks (a DistributedEmbedding's tables).

Each rank holds different rows of such a variable, so nothing that assumes
every rank holds the same values may touch it: the gradient reductions
(DistributedOptimizer, DistributedGradientTape) pass its gradient through as
it is (the layer's backward pass already sent every row's gradient to the
rank owning the row, averaged), and ``broadcast_variables`` leaves it alone.
The mark is kept on the variable object (and on the tf.Variable a Keras
variable holds), so it travels wherever the variable goes::

    mark_sharded_rows(table_shard, owner=layer)
    is_sharded_rows(table_shard)      # True
    sharded_rows_owner(table_shard)   # layer

The objects that hold such state (a DistributedEmbedding layer, a sharded
DistributedOptimizer) carry one class marker, ``SHARDED_STATE``, and offer one
protocol (tf_hvd._keras.sharded_state.protocol)::

    holds_sharded_state(layer)        # True
"""

_MARK = "_hvd_sharded_rows_owner"

# The class attribute (True) of every holder of sharded state: a sharded
# DistributedOptimizer's class, DistributedEmbedding.
SHARDED_STATE = "_hvd_sharded"


def _objects(variable):
    yield variable
    inner = getattr(variable, "_value", None)
    if inner is not None and inner is not variable:
        yield inner


def mark_sharded_rows(variable, owner):
    """Mark ``variable`` as holding this rank's rows only; ``owner`` is the object
    that updates it (it must have ``apply_sparse_gradient(variable, grad, optimizer)``)."""
    for obj in _objects(variable):
        try:
            object.__setattr__(obj, _MARK, owner)
        except (AttributeError, TypeError):  # pragma: no cover - a slotted type
            pass


def sharded_rows_owner(variable):
    """The object that updates ``variable`` if its rows are sharded, else None."""
    if variable is None:
        return None
    for obj in _objects(variable):
        owner = getattr(obj, _MARK, None)
        if owner is not None:
            return owner
    return None


def is_sharded_rows(variable):
    """Whether ``variable`` holds only this rank's rows of a sharded table."""
    return sharded_rows_owner(variable) is not None


def holds_sharded_state(obj):
    """Whether ``obj`` (an optimizer or a layer) holds sharded state: its class
    carries the marker and it offers the protocol."""
    return obj is not None and bool(getattr(type(obj), SHARDED_STATE, False))


def sharded_rows_layers(model):
    """The layers of ``model`` (a Keras model or layer) that hold sharded rows
    (DistributedEmbedding), in Keras' flattening order."""
    flatten = getattr(model, "_flatten_layers", None)
    if flatten is None:
        return []
    return [layer for layer in flatten(include_self=True) if holds_sharded_state(layer)]

"""What a holder of sharded state offers (the sharded DistributedOptimizer, the
DistributedEmbedding layer), and finding the holders of a model.

A holder's class carries the marker (tf_hvd.sharded_rows.SHARDED_STATE, a class
attribute set to True) and these methods, every one a collective where it says so:

``sharded_state_exists()``
    whether this rank holds state laid out with the other ranks (an optimizer that
    has been built; a layer that has looked up or re-sharded with them). A rank that
    has none (one that just joined) takes the state at its first ``lay_out``.
``gather_whole(root_rank=None)``
    the whole state (what one process would hold) on ``root_rank``, None elsewhere;
    on every rank for None. Collective.
``load_whole(values, root_rank=None)``
    each rank keeps its part of ``values``, in its current layout; with
    ``root_rank``, that rank's ``values`` are broadcast first. Returns the values.
``lay_out(model)``
    lay the state out over the ranks as they are now (new variables of this rank's
    size), making it for ``model``'s variables if this rank has none. Collective.
``gather_for_save(root_rank=0)``
    gather to ``root_rank`` what its next Keras save (``save_own_variables``)
    writes whole. Collective.

How parts are laid out is row_layout.RowLayout's rule, whole values are the form a
checkpoint, an elastic commit and ``save_model`` keep (they do not depend on the
number of ranks)::

    for holder in holders(model, model.optimizer):
        holder.gather_for_save(0)                # every rank, then rank 0 saves
"""

from tf_hvd.sharded_rows import SHARDED_STATE, holds_sharded_state, sharded_rows_layers

METHODS = ("sharded_state_exists", "gather_whole", "load_whole", "lay_out",
           "gather_for_save")

__all__ = ["SHARDED_STATE", "METHODS", "holds_sharded_state", "holders",
           "missing_methods"]


def holders(model, optimizer=None):
    """The holders of sharded state of ``model`` and ``optimizer``: the layers first,
    then the optimizer if it holds any; the same order on every rank, so that their
    collectives meet."""
    found = sharded_rows_layers(model) if model is not None else []
    if optimizer is not None and holds_sharded_state(optimizer):
        found.append(optimizer)
    return found


def missing_methods(holder):
    """The protocol's methods ``holder`` lacks (tests check both holders offer all)."""
    return [m for m in METHODS if not callable(getattr(holder, m, None))]

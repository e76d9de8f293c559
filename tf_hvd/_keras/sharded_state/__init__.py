"""Sharded state: what each rank holds only a part of (the sharded optimizer's slots,
DistributedEmbedding's tables and their slots), and the one protocol every holder of
it offers, so that elastic states, ``save_model`` and checkpoints ask the protocol
instead of knowing each kind.

The room, from the bottom::

    row_layout.py    which rank owns which row: "mod" or "range" (the sharded
                     optimizer's flat slices are "range" over their elements)
    pre_reduced.py   whether gradients were averaged already (one rule, one message)
    protocol.py      the marker, the holders of a model, the methods each offers
    initial_rows.py  a sharded table's initial rows: seed and row id, not the ranks

    for holder in holders(model, optimizer):        # layers first, then the optimizer
        whole = holder.gather_whole(root_rank=None)  # a collective
        ...                                          # the job re-forms
        holder.lay_out(model); holder.load_whole(whole)
"""

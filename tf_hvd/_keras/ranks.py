"""This process's (rank, size) as the Keras support reads it: (0, 1) before
``hvd.init()``, since a model is also built, saved and loaded in one process.

    from tf_hvd._keras import ranks

    rank, size = ranks.rank_size()    # (0, 1) until hvd.init()

Callers read it as ``ranks.rank_size()`` (through the module), so a test stands in
another rank and size for all of them by patching this one attribute.
"""

from tf_hvd import topology


def rank_size():
    """(this process's rank, the job's size), or (0, 1) when the job is not initialised."""
    if not topology.is_initialized():
        return 0, 1
    return topology.rank(), topology.size()

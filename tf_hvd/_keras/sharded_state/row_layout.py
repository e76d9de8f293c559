"""Which rank owns which row of sharded state: the one row layout (numpy, or TensorFlow
ops for the same rule inside a traced call).

Two layouts:

* ``"mod"``: row ``i`` lives on rank ``i % n`` at local row ``i // n``; hot ids
  (small ids, as frequency-sorted vocabularies have) spread over every rank
  (DistributedEmbedding's default);
* ``"range"``: rank ``q`` holds one contiguous block of rows (``V // n`` rows,
  one more for the first ``V % n`` ranks): what ``hvd.reducescatter`` gives each
  rank of dimension 0, so the sharded optimizer's flat slices are this layout of
  its elements, and a table sorted by another key wants it.

Example::

    layout = RowLayout(10, 3, "mod")
    layout.rows_on(0), layout.owner(np.array([4, 5])), layout.local_row(np.array([4, 5]))
    # 4, [1, 2], [1, 1]
    RowLayout(10, 3, "range").global_ids(1)      # [4, 5, 6]
    RowLayout(10, 3, "range").bounds(1)          # (4, 7)
    layout.rows_of(np.arange(10), 1)             # [1, 4, 7]: rank 1's rows of a whole
"""

import numpy as np

MODES = ("mod", "range")


class RowLayout(object):
    """Rows ``0 .. vocabulary_size-1`` of one table (or elements of one flat
    space) over ``n`` ranks."""

    def __init__(self, vocabulary_size, n, mode="mod"):
        if mode not in MODES:
            raise ValueError("row sharding must be one of %s, got %r" % (MODES, mode))
        self.vocabulary_size = int(vocabulary_size)
        self.n = int(n)
        self.mode = mode
        self.base, self.extra = divmod(self.vocabulary_size, self.n)

    def start(self, q):
        """First global row of rank ``q`` (``"range"`` only)."""
        return q * self.base + min(q, self.extra)

    def bounds(self, q):
        """``(start, end)`` of rank ``q``'s block (``"range"`` only)."""
        start = self.start(q)
        return start, start + self.rows_on(q)

    def rows_on(self, q):
        """How many rows rank ``q`` holds."""
        if self.mode == "mod":
            return (self.vocabulary_size - q + self.n - 1) // self.n
        return self.base + (1 if q < self.extra else 0)

    def local_slice(self, q):
        """Rank ``q``'s rows of a whole table as a slice of it (global order)."""
        if self.mode == "mod":
            return slice(q, None, self.n)
        start, end = self.bounds(q)
        return slice(start, end)

    def global_ids(self, q):
        """The global ids of rank ``q``'s rows, in local order."""
        return np.arange(*self.local_slice(q).indices(self.vocabulary_size),
                         dtype=np.int64)

    def rows_of(self, whole, q):
        """Rank ``q``'s rows of ``whole`` (an array or an h5py dataset of
        ``vocabulary_size`` rows: only those rows are read)."""
        return np.asarray(whole[self.local_slice(q)])

    def locate(self, ids, xp=np):
        """``(owner rank, local row)`` of each of ``ids``, computed with ``xp``:
        numpy for arrays, or the ``tensorflow`` module for int64 tensors in a traced
        call (the same rule: both offer ``where``, ``minimum`` and ``zeros_like``)."""
        n = self.n
        if self.mode == "mod":
            return ids % n, ids // n
        base, extra = self.base, self.extra
        if base == 0:  # fewer rows than ranks: row i on rank i
            return ids, xp.zeros_like(ids)
        boundary = extra * (base + 1)
        owner = xp.where(ids < boundary, ids // (base + 1),
                         extra + (ids - boundary) // base)
        return owner, ids - (owner * base + xp.minimum(owner, extra))

    def owner(self, ids):
        """The rank owning each of ``ids`` (valid ids, any integer array)."""
        return self.locate(np.asarray(ids, dtype=np.int64))[0]

    def local_row(self, ids):
        """Where each of ``ids`` sits in its owner's block."""
        return self.locate(np.asarray(ids, dtype=np.int64))[1]

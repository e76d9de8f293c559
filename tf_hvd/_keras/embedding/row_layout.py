"""Which rank owns which row of a sharded table (pure Python/numpy, no TensorFlow).

Two layouts, chosen per table:

* ``"mod"``: row ``i`` lives on rank ``i % n`` at local row ``i // n``; hot ids
  (small ids, as frequency-sorted vocabularies have) spread over every rank;
* ``"range"``: rank ``q`` holds one contiguous block of rows (``V // n`` rows,
  one more for the first ``V % n`` ranks), what a checkpoint's row ranges or a
  table sorted by another key want.

Example::

    layout = RowLayout(10, 3, "mod")
    layout.rows_on(0), layout.owner(np.array([4, 5])), layout.local_row(np.array([4, 5]))
    # 4, [1, 2], [1, 1]
    RowLayout(10, 3, "range").global_ids(1)      # [4, 5, 6]
"""

import numpy as np

MODES = ("mod", "range")


class RowLayout(object):
    """Rows ``0 .. vocabulary_size-1`` of one table over ``n`` ranks."""

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

    def rows_on(self, q):
        """How many rows rank ``q`` holds."""
        if self.mode == "mod":
            return (self.vocabulary_size - q + self.n - 1) // self.n
        return self.base + (1 if q < self.extra else 0)

    def owner(self, ids):
        """The rank owning each of ``ids`` (valid ids, any integer array)."""
        ids = np.asarray(ids, dtype=np.int64)
        if self.mode == "mod":
            return ids % self.n
        boundary = self.extra * (self.base + 1)
        if self.base == 0:
            return ids
        return np.where(ids < boundary, ids // (self.base + 1),
                        self.extra + (ids - boundary) // self.base)

    def local_row(self, ids):
        """Where each of ``ids`` sits in its owner's block."""
        ids = np.asarray(ids, dtype=np.int64)
        if self.mode == "mod":
            return ids // self.n
        owners = self.owner(ids)
        return ids - (owners * self.base + np.minimum(owners, self.extra))

    def global_ids(self, q):
        """The global ids of rank ``q``'s rows, in local order."""
        if self.mode == "mod":
            return np.arange(q, self.vocabulary_size, self.n, dtype=np.int64)
        start = self.start(q)
        return np.arange(start, start + self.rows_on(q), dtype=np.int64)

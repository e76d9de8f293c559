"""Where each parameter's optimizer state lives when it is sharded (pure Python).

The layout of tf_hvd's sharded optimizer is *flat slices*: the model's
trainable variables of one dtype, in the order the optimizer is built on, are
laid end to end in one flat space of ``total`` elements; rank ``q`` of ``n``
owns the contiguous slice that ``hvd.reducescatter`` gives it (``total // n``
elements, one more for the first ``total % n`` ranks: the ``"range"`` row layout of
sharded state, tf_hvd._keras.sharded_state.row_layout, over the elements). A slice may cut a
variable in two; every rank owns the same number of elements (+-1) whatever
the sizes of the variables::

    layout = ShardLayout([("dense/kernel", (6, 8), "float32"),
                          ("dense/bias", (8,), "float32")], 3)
    layout.groups[0].total          # 56
    layout.groups[0].bounds(1)      # (19, 38): rank 1 owns elements 19..37
    layout.groups[0].pieces(1)      # [Piece(var=0, lo=19, hi=38, at=0)]
"""

import collections

import numpy as np

from tf_hvd._keras.sharded_state.row_layout import RowLayout
from tf_hvd.job.rank_names import rank_list

Piece = collections.namedtuple("Piece", "var lo hi at")
Piece.__doc__ = ("Elements ``lo:hi`` of variable ``var`` (flattened), found at "
                 "``at`` in the rank's shard.")


def _numel(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def shard_bounds(total, n, q):
    """``(start, end)`` of rank ``q``'s slice of ``total`` elements over ``n``
    ranks: reducescatter's split of dimension 0."""
    return RowLayout(total, n, "range").bounds(q)


class ShardGroup(object):
    """The variables of one dtype laid end to end (``offsets[k]`` is where the
    k-th of ``members`` starts), sliced over ``n`` ranks."""

    def __init__(self, dtype, members, sizes, n):
        self.dtype = dtype
        self.members = list(members)       # indices into the layout's variables
        self.sizes = list(sizes)
        self.offsets = list(np.cumsum([0] + self.sizes[:-1]).astype(int)) if sizes else []
        self.total = int(sum(self.sizes))
        self.n = n
        self.rows = RowLayout(self.total, n, "range")

    def bounds(self, q):
        return self.rows.bounds(q)

    def shard_size(self, q):
        start, end = self.bounds(q)
        return end - start

    def pieces(self, q):
        """The parts of variables in rank ``q``'s slice, in flat order."""
        start, end = self.bounds(q)
        out = []
        for var, off, size in zip(self.members, self.offsets, self.sizes):
            lo, hi = max(start, off), min(end, off + size)
            if hi > lo:
                out.append(Piece(var, lo - off, hi - off, lo - start))
        return out


class ShardLayout(object):
    """Flat-slice layout of ``variables`` (``(name, shape, dtype)`` tuples in
    the order the optimizer is built on) over ``n`` ranks; one ShardGroup per
    dtype, in order of first appearance."""

    def __init__(self, variables, n):
        self.variables = [(str(name), tuple(int(d) for d in shape), str(dtype))
                          for name, shape, dtype in variables]
        self.n = int(n)
        by_dtype = collections.OrderedDict()
        for i, (_, shape, dtype) in enumerate(self.variables):
            by_dtype.setdefault(dtype, []).append(i)
        self.groups = [ShardGroup(dtype, idxs,
                                  [_numel(self.variables[i][1]) for i in idxs], self.n)
                       for dtype, idxs in by_dtype.items()]
        self.group_of = {}
        for g, group in enumerate(self.groups):
            for k, i in enumerate(group.members):
                self.group_of[i] = (g, k)

    def signature(self):
        """What must agree across ranks: shapes and dtypes, by position."""
        return [(shape, dtype) for _, shape, dtype in self.variables]

    def elements(self):
        return sum(g.total for g in self.groups)


def mismatch_message(signatures, names, ranks=None):
    """The error for variables that differ across ranks, or None if they agree.

    ``signatures[k]`` and ``names[k]`` are rank ``ranks[k]``'s list of
    ``(shape, dtype)`` and of variable names, in build order. The message names
    the first differing variable by its name on each rank and says which ranks
    have which shape and dtype::

        sharded optimizer: trainable variable 1 differs across ranks: 'dense/bias'
        has shape (8,) float32 on ranks 0, 2 but shape (9,) float32 on rank 1
    """
    ranks = list(ranks) if ranks is not None else list(range(len(signatures)))
    counts = [len(s) for s in signatures]
    if len(set(counts)) > 1:
        by_count = collections.OrderedDict()
        for r, c in zip(ranks, counts):
            by_count.setdefault(c, []).append(r)
        return ("sharded optimizer: the number of trainable variables differs across "
                "ranks: %s; every rank must build the optimizer on the same variables"
                % "; ".join("%d on %s" % (c, rank_list(rs)) for c, rs in by_count.items()))
    for i in range(counts[0] if counts else 0):
        seen = collections.OrderedDict()
        for r, sig in zip(ranks, signatures):
            seen.setdefault(tuple(sig[i]), []).append(r)
        if len(seen) > 1:
            var_names = collections.OrderedDict()
            for r, nm in zip(ranks, names):
                var_names.setdefault(nm[i], []).append(r)
            if len(var_names) == 1:
                label = "'%s'" % next(iter(var_names))
            else:
                label = ", ".join("'%s' on %s" % (nm, rank_list(rs))
                                  for nm, rs in var_names.items())
            parts = ["shape %s %s on %s" % (shape, dtype, rank_list(rs))
                     for (shape, dtype), rs in seen.items()]
            return ("sharded optimizer: trainable variable %d differs across ranks: %s "
                    "has %s" % (i, label, " but ".join(parts)))
    return None


"""Helpers for the training test workers (run inside every rank).

A worker runs many sections in one process. A wrong value is recorded and the
worker goes on, so every rank still issues the same collectives; an exception
ends the rank at once (the launcher then stops the others). At the end every
rank prints ``TRAINING OK <n> checks`` or its failures and exits 0 or 1.

Data sharding used by the equivalence checks: the global sample stream is cut
into passes of ``size * b`` samples; in every pass rank r takes the r-th block
of ``b`` samples. One process running batches of ``k * size * b`` samples
(k = backward_passes_per_step) sees exactly the same samples per update.
"""

import hashlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "workers"))
from checklib import Checker  # noqa: E402


class Checks(Checker):
    """checklib's Checker for a training worker: rank and size from ``hvd``, sections
    chosen by TRAINING_ONLY, the outcome on stdout (``TRAINING OK <n> checks``)."""

    def __init__(self, hvd):
        Checker.__init__(self, hvd.rank(), hvd.size(), None,
                         os.environ.get("TRAINING_ONLY", ""), outcome_prefix="TRAINING ")
        self.hvd = hvd

    def close(self, label, actual, expected, rtol=1e-5, atol=1e-6):
        """Lists of arrays compared as float64 (training mixes float32 and float64)."""
        Checker.close(self, label, [np.asarray(a, dtype=np.float64) for a in actual],
                      [np.asarray(e, dtype=np.float64) for e in expected], rtol, atol)

    def same_on_all_ranks(self, label, arrays):
        """Every rank's ``arrays`` are bit-identical (compared by digest)."""
        digests = self.hvd.allgather_object(digest_arrays(arrays))
        self.expect(len(set(digests)) == 1, label,
                    "values differ across ranks (digests %s)" % (digests,))

    def differ_across_ranks(self, label, arrays):
        digests = self.hvd.allgather_object(digest_arrays(arrays))
        self.expect(len(set(digests)) == len(digests), label,
                    "expected rank-specific values, got digests %s" % (digests,))


def digest_arrays(arrays):
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(np.asarray(a))
        h.update(str((a.dtype.str, a.shape)).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def make_data(passes, size, batch, dim, seed=1234, classes=None):
    """Global data for ``passes`` passes of ``size * batch`` samples."""
    rs = np.random.RandomState(seed)
    n = passes * size * batch
    x = rs.randn(n, dim).astype(np.float32)
    if classes:
        y = rs.randint(0, classes, size=(n,)).astype(np.int32)
    else:
        y = (x @ rs.randn(dim, 1) * 0.5 + 0.1 * rs.randn(n, 1)).astype(np.float32)
    return x, y


def shard(array, size, rank, batch):
    """Rank ``rank``'s samples: its block of ``batch`` in every pass."""
    per_pass = size * batch
    passes = array.shape[0] // per_pass
    blocks = array[:passes * per_pass].reshape((passes, size, batch) + array.shape[1:])
    return blocks[:, rank].reshape((passes * batch,) + array.shape[1:])


def initial_values(shapes, seed):
    rs = np.random.RandomState(seed)
    return [(rs.randn(*s) * 0.3).astype(np.float32) for s in shapes]

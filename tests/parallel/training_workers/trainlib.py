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
import time
import traceback

import numpy as np


class Checks(object):
    def __init__(self, hvd):
        self.hvd = hvd
        self.rank = hvd.rank()
        self.size = hvd.size()
        self.count = 0
        self.failures = []
        self.t0 = time.time()
        only = os.environ.get("TRAINING_ONLY", "")
        self.only = set(s for s in only.split(",") if s)

    def log(self, msg):
        sys.stdout.write("[rank %d] %s\n" % (self.rank, msg))
        sys.stdout.flush()

    def expect(self, cond, label, msg="condition is false"):
        if cond:
            self.count += 1
        else:
            self.failures.append("%s: %s" % (label, msg))
            self.log("FAIL %s: %s" % (label, msg))

    def close(self, label, actual, expected, rtol=1e-5, atol=1e-6):
        actual = [np.asarray(a, dtype=np.float64) for a in actual]
        expected = [np.asarray(e, dtype=np.float64) for e in expected]
        if len(actual) != len(expected):
            self.expect(False, label, "%d arrays vs %d" % (len(actual), len(expected)))
            return
        for i, (a, e) in enumerate(zip(actual, expected)):
            if a.shape != e.shape:
                self.expect(False, "%s[%d]" % (label, i),
                            "shape %s vs %s" % (a.shape, e.shape))
                continue
            ok = np.allclose(a, e, rtol=rtol, atol=atol)
            self.expect(ok, "%s[%d]" % (label, i),
                        "max abs diff %.3g (rtol=%g atol=%g)" % (
                            float(np.max(np.abs(a - e))) if a.size else 0.0, rtol, atol))

    def same_on_all_ranks(self, label, arrays):
        """Every rank's ``arrays`` are bit-identical (compared by digest)."""
        digest = digest_arrays(arrays)
        digests = self.hvd.allgather_object(digest)
        self.expect(len(set(digests)) == 1, label,
                    "values differ across ranks (digests %s)" % (digests,))

    def differ_across_ranks(self, label, arrays):
        digest = digest_arrays(arrays)
        digests = self.hvd.allgather_object(digest)
        self.expect(len(set(digests)) == len(digests), label,
                    "expected rank-specific values, got digests %s" % (digests,))

    def section(self, name, fn, *args):
        if self.only and name not in self.only:
            return
        t0 = time.time()
        before, failed_before = self.count, len(self.failures)
        try:
            fn(*args)
        except BaseException:  # noqa: B902 - report anything, then die
            self.log("EXCEPTION in section %s:\n%s" % (name, traceback.format_exc()))
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(1)
        self.log("section %-30s %3d checks, %d failures, %.1fs" % (
            name, self.count - before, len(self.failures) - failed_before,
            time.time() - t0))

    def finish(self):
        if self.failures:
            self.log("TRAINING FAILED %d of %d checks:\n  %s" % (
                len(self.failures), self.count + len(self.failures),
                "\n  ".join(self.failures)))
            return 1
        self.log("TRAINING OK %d checks (%.1fs)" % (self.count, time.time() - self.t0))
        return 0


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

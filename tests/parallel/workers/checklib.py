"""The one check library of the test workers (runs inside each rank).

A worker runs many checks in one process. A wrong value is recorded and the
worker goes on (every rank still issues the same collectives); an unexpected
exception ends the rank at once with its traceback. At the end each rank
prints ``OK <n> checks`` (or its failures) and, given a result directory,
writes ``rank<r>.ok`` / ``rank<r>.fail`` there for the pytest side. The
training workers use it through tests/parallel/training_workers/trainlib.py.
"""

import argparse
import os
import sys
import time
import traceback

import numpy as np


def parse_args(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--np", type=int, required=True, help="expected size")
    p.add_argument("--transport", choices=("gloo", "mpi", "local"), required=True)
    p.add_argument("--result-dir", required=True)
    p.add_argument("--expect-env", action="append", default=[], metavar="KEY=VALUE",
                   help="fail unless the environment has KEY=VALUE (launcher pass-through)")
    p.add_argument("--only", default="", help="comma-separated sections to run (default: all)")
    return p.parse_args(argv)


class Checker(object):
    def __init__(self, rank, size, result_dir, only="", outcome_prefix=""):
        self.rank = rank
        self.size = size
        self.result_dir = result_dir  # None: report on stdout only
        self.outcome_prefix = outcome_prefix  # before "OK"/"FAILED" in the last line
        self.count = 0
        self.failures = []
        self.only = set(s for s in only.split(",") if s)
        self._t0 = time.time()

    # -- reporting -----------------------------------------------------------------------
    def log(self, msg):
        sys.stdout.write("[rank %d] %s\n" % (self.rank, msg))
        sys.stdout.flush()

    def fail(self, label, msg):
        self.failures.append("%s: %s" % (label, msg))
        self.log("FAIL %s: %s" % (label, msg))

    def passed(self):
        self.count += 1

    def wants(self, section):
        return not self.only or section in self.only

    def section(self, name, fn, *args):
        """Runs fn(*args) as a named section; an exception ends the process (fail fast)."""
        if not self.wants(name):
            return
        t0 = time.time()
        before, failed_before = self.count, len(self.failures)
        try:
            fn(*args)
        except BaseException:  # noqa: B902 - report anything, then die
            self.log("EXCEPTION in section %s:\n%s" % (name, traceback.format_exc()))
            self._write("fail", "exception in section %s\n%s" % (name, traceback.format_exc()))
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(1)
        self.log("section %-28s %4d checks, %d failures, %.1fs" % (
            name, self.count - before, len(self.failures) - failed_before, time.time() - t0))

    def finish(self):
        if self.failures:
            self.log("%sFAILED %d of %d checks:\n  %s" % (
                self.outcome_prefix, len(self.failures), self.count + len(self.failures),
                "\n  ".join(self.failures)))
            self._write("fail", "\n".join(self.failures))
            sys.stdout.flush()
            return 1
        self.log("%sOK %d checks (%.1fs)" % (self.outcome_prefix, self.count,
                                              time.time() - self._t0))
        self._write("ok", "%d\n" % self.count)
        return 0

    def _write(self, kind, text):
        if self.result_dir is None:
            return
        path = os.path.join(self.result_dir, "rank%d.%s" % (self.rank, kind))
        with open(path, "w") as f:
            f.write(text)

    # -- comparisons ---------------------------------------------------------------------
    def expect(self, cond, label, msg="condition is false"):
        if cond:
            self.passed()
        else:
            self.fail(label, msg)

    def equal(self, label, actual, expected):
        if actual == expected:
            self.passed()
        else:
            self.fail(label, "got %r, expected %r" % (actual, expected))

    def close(self, label, actual, expected, rtol=None, atol=None):
        """Compares (nested tuples/lists of) arrays: structure, dtype, shape and values."""
        if isinstance(expected, (tuple, list)):
            if not isinstance(actual, (tuple, list)) or len(actual) != len(expected):
                self.fail(label, "expected a sequence of %d results, got %r" % (
                    len(expected), type(actual)))
                return
            for i, (a, e) in enumerate(zip(actual, expected)):
                # Checker's comparison by name: a subclass's close() may convert
                # its arguments first (trainlib) and must not run again per item.
                Checker.close(self, "%s[%d]" % (label, i), a, e, rtol, atol)
            return
        msg = array_mismatch(to_numpy(actual), np.asarray(expected), rtol, atol)
        if msg is None:
            self.passed()
        else:
            self.fail(label, msg)

    def raises(self, label, fn, exc_types, contains=()):
        """Expects fn() to raise one of exc_types whose message satisfies every entry
        of ``contains`` (an entry is a string or a tuple of alternatives; matched
        case-insensitively, ignoring whitespace). Returns the exception or None."""
        try:
            fn()
        except exc_types as e:
            text = error_text(e)
            missing = [c for c in contains if not mentions(text, c)]
            if missing:
                self.fail(label, "error message %r lacks %r" % (text, missing))
            else:
                self.passed()
            return e
        except Exception as e:  # noqa: BLE001
            self.fail(label, "expected %s, got %s: %s" % (
                _names(exc_types), type(e).__name__, error_text(e)))
            return e
        self.fail(label, "expected %s, nothing was raised" % _names(exc_types))
        return None


def _names(exc_types):
    if isinstance(exc_types, tuple):
        return " or ".join(t.__name__ for t in exc_types)
    return exc_types.__name__


def error_text(e):
    return getattr(e, "message", None) or str(e)


def _squash(text):
    return "".join(text.split()).lower()


def mentions(text, alternatives):
    if isinstance(alternatives, str):
        alternatives = (alternatives,)
    squashed = _squash(text)
    return any(_squash(a) in squashed for a in alternatives)


def shape_forms(dims):
    """Ways an error message may write a shape: [4,5] (4,5) 4x5 [4, 5]."""
    dims = [str(d) for d in dims]
    forms = ["[%s]" % ",".join(dims), "(%s)" % ",".join(dims), "x".join(dims)]
    if len(dims) == 1:
        forms.append("(%s,)" % dims[0])
    return tuple(forms)


def to_numpy(x):
    if hasattr(x, "numpy"):
        return x.numpy()
    return np.asarray(x)


def _as_float(a):
    return a.astype(np.complex128 if np.iscomplexobj(a) else np.float64)


def array_mismatch(actual, expected, rtol, atol):
    """None if equal enough, else a readable description of the difference."""
    if actual.dtype != expected.dtype:
        return "dtype %s, expected %s" % (actual.dtype, expected.dtype)
    if actual.shape != expected.shape:
        return "shape %s, expected %s" % (actual.shape, expected.shape)
    if expected.dtype == np.bool_ or np.issubdtype(expected.dtype, np.integer):
        if np.array_equal(actual, expected):
            return None
        bad = np.argwhere(actual != expected)
    else:
        if rtol is None or atol is None:
            d_rtol, d_atol = default_tolerance(expected.dtype)
            rtol = d_rtol if rtol is None else rtol
            atol = d_atol if atol is None else atol
        a, e = _as_float(actual), _as_float(expected)
        if np.allclose(a, e, rtol=rtol, atol=atol, equal_nan=True):
            return None
        bad = np.argwhere(~np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True))
    first = tuple(int(i) for i in bad[0]) if bad.size else ()
    return "%d element(s) differ, first at %s: got %r, expected %r\n    got      %s\n" \
           "    expected %s" % (len(bad), first, actual[first], expected[first],
                                _short(actual), _short(expected))


def _short(a):
    text = np.array2string(np.asarray(a).ravel()[:24], max_line_width=200)
    return text + (" ..." if np.asarray(a).size > 24 else "")


_TOL = {"float16": (2e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2), "float32": (1e-5, 1e-6),
        "float64": (1e-12, 1e-12)}


def default_tolerance(np_dtype):
    return _TOL.get(np.dtype(np_dtype).name, (1e-6, 1e-6))

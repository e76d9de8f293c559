"""The knob table's rules (cc/common/knobs.cc) for the few knobs read outside the core.

The launcher and a rank's Python side start without the op library (no TensorFlow),
yet read a few HOROVOD_* variables the core also parses: the launcher's start-up and
elastic timeouts, a rank's topology. They are parsed here exactly as the table parses
them (same accepted text, same ranges, same message), and tests/unit/test_knobs.py
checks this copy of the rows against the library's table.

    >>> parse_seconds("HOROVOD_START_TIMEOUT", " 45 ")
    45.0
    >>> seconds_knob({"HOROVOD_START_TIMEOUT": "0"}, "HOROVOD_START_TIMEOUT", 30.0)
    30.0
"""

import math
import re

MAX_SECONDS = 1e6   # kMaxSeconds
MAX_RANKS = 1 << 24

# name -> (type, min, max): the rows of the table read here.
ROWS = {
    "HOROVOD_START_TIMEOUT": ("seconds", 0, MAX_SECONDS),
    "HOROVOD_ELASTIC_TIMEOUT": ("seconds", 0, MAX_SECONDS),
    "HOROVOD_RANK": ("int", 0, MAX_RANKS),
    "HOROVOD_SIZE": ("int", 1, MAX_RANKS),
    "HOROVOD_LOCAL_RANK": ("int", 0, MAX_RANKS),
    "HOROVOD_LOCAL_SIZE": ("int", 1, MAX_RANKS),
    "HOROVOD_CROSS_RANK": ("int", 0, MAX_RANKS),
    "HOROVOD_CROSS_SIZE": ("int", 1, MAX_RANKS),
    "HOROVOD_GLOO_RENDEZVOUS_PORT": ("int", 0, 65535),
}
# tf_hvd's own variables of the same kinds (not knobs: no row in the table).
_OWN = (("int", 0, MAX_RANKS), ("seconds", 0, MAX_SECONDS))

_DIGITS = re.compile(r"^[-+]?[0-9]+$")
_DECIMAL = re.compile(r"^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$")


def _number_text(value):
    """The table's %.15g."""
    return "%.15g" % value


def _expected(kind, low, high):
    unit = " of seconds" if kind == "seconds" else ""
    if low == 0:
        what = "a non-negative number%s up to %s" % (unit, _number_text(high))
    else:
        what = "a number%s from %s to %s" % (unit, _number_text(low), _number_text(high))
    if kind == "int":
        what += ", written as a plain integer (no suffix such as 1M)"
    return what


def _row(name, kind):
    row = ROWS.get(name)
    if row is None:
        return next(r for r in _OWN if r[0] == kind)
    assert row[0] == kind, (name, row)
    return row


def _invalid(name, text, row):
    return ValueError("%s='%s' is not a valid value: expected %s" % (name, text, _expected(*row)))


def parse_int(name, text):
    """An integer knob's value: digits only (an optional sign), within the row's range.
    Raises ValueError with the table's message."""
    row = _row(name, "int")
    stripped = text.strip()
    if not _DIGITS.match(stripped) or not row[1] <= int(stripped) <= row[2]:
        raise _invalid(name, text, row)
    return int(stripped)


def parse_seconds(name, text):
    """A seconds knob's value: a finite decimal number (no hexadecimal, inf or nan),
    within the row's range. Raises ValueError with the table's message."""
    row = _row(name, "seconds")
    stripped = text.strip()
    if not _DECIMAL.match(stripped):
        raise _invalid(name, text, row)
    value = float(stripped)
    if not math.isfinite(value) or not row[1] <= value <= row[2]:
        raise _invalid(name, text, row)
    return value


# Knobs whose row says "0: as the default".
ZERO_MEANS_DEFAULT = frozenset(["HOROVOD_START_TIMEOUT"])


def seconds_knob(environ, name, default):
    """``name``'s seconds from ``environ`` by the table's rules; ``default`` when it is
    unset or empty (or 0, for a knob whose row says so). Raises ValueError."""
    text = environ.get(name, "")
    if not text.strip():
        return default
    value = parse_seconds(name, text)
    return default if value == 0 and name in ZERO_MEANS_DEFAULT else value

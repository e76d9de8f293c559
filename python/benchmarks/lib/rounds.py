"""Interleaved rounds: every figure compare.py reports is the median of several
rounds, with its spread, and every ratio comes from pairs measured in the same round.

One round starts every contender once, one after the other; the order flips
from round to round (A B C, C B A, A B C, ...) so a slow drift of the machine's
load weighs on every contender alike. A ratio tf_hvd / alternative is computed
per round, from the two runs of that round, and its median and spread (min-max
over the rounds) are reported. A target counts as met only when the whole
spread clears it:

    >>> verdict([0.93, 0.95, 0.97], ">=", 0.9)
    'met'
    >>> verdict([0.85, 0.95], ">=", 0.9)
    'unclear'
"""

import os
import signal
import statistics
import subprocess
import sys
import time

from lib import formats, launch, tables


def spread(values):
    """{'n', 'median', 'min', 'max', 'values'} over the rounds (None values are
    rounds without a result and are left out of the statistics)."""
    found = [v for v in values if v is not None]
    if not found:
        return {"n": 0, "median": None, "min": None, "max": None, "values": list(values)}
    return {"n": len(found), "median": statistics.median(found), "min": min(found),
            "max": max(found), "values": list(values)}


def verdict(ratios, comparison, target):
    """'met' when every round's ratio clears the target, 'not met' when none
    does, 'unclear' when the spread straddles it, None without data."""
    found = [r for r in ratios if r is not None]
    if not found:
        return None
    passes = [(r <= target) if comparison == "<=" else (r >= target) for r in found]
    if all(passes):
        return "met"
    if not any(passes):
        return "not met"
    return "unclear"


def within(value, s):
    """Whether value lies inside the spread s ([min, max]); None without data.

    >>> within(0.8, spread([0.7, 0.9, 0.85]))
    True
    """
    if value is None or not s or s.get("median") is None:
        return None
    return s["min"] <= value <= s["max"]


def fmt_spread(s, digits=3):
    """'0.81 [0.76-0.88]' (median [min-max]); '-' without data."""
    if not s or s.get("median") is None:
        return "-"
    if s["n"] == 1:
        return formats.fmt(s["median"], digits)
    return "%s [%s-%s]" % (formats.fmt(s["median"], digits), formats.fmt(s["min"], digits),
                           formats.fmt(s["max"], digits))


def round_order(names, index):
    """The contenders' order in round index (0-based): forward, backward, ..."""
    return list(names) if index % 2 == 0 else list(reversed(names))


# ---------------------------------------------------------------------------
# Running the rounds


def run_rounds(bench_name, parts, args, part_configs, valid_contenders, rounds):
    """Runs every selected contender once per round, interleaved.

    Returns (contenders by name, [runs by name, one dict per round]).
    """
    per_round = []
    contenders = {}
    started = time.time()
    for index in range(rounds):
        tables.log("[%s] round %d of %d" % (bench_name, index + 1, rounds))
        contenders, runs = launch.run_all(
            bench_name, parts, args, part_configs, valid_contenders,
            order=lambda names: round_order(names, index),
            tag="%s-r%d" % (args.tag or bench_name, index + 1))
        per_round.append(runs)
    tables.log("[%s] %d rounds done in %.1f s" % (bench_name, rounds, time.time() - started))
    return contenders, per_round


def merge_records(records_per_round, key, value, lower_is_better=False):
    """One record per key for the tables and plots: the round whose value is the
    median (for an even count the worse of the two middle ones), with 'rounds'
    (the spread) added.

    key(rec) -> hashable; value(rec) -> number or None.
    """
    groups = {}
    order = []
    for index, records in enumerate(records_per_round):
        for rec in records:
            k = key(rec)
            if k not in groups:
                groups[k] = [None] * len(records_per_round)
                order.append(k)
            groups[k][index] = rec
    merged = []
    for k in order:
        recs = groups[k]
        values = [value(r) if r is not None else None for r in recs]
        present = sorted([(v, i) for i, v in enumerate(values) if v is not None],
                         reverse=lower_is_better)  # worst first
        pick = present[(len(present) - 1) // 2][1] if present else next(
            i for i, r in enumerate(recs) if r is not None)
        rec = dict(recs[pick])
        rec["rounds"] = spread(values)
        rec["rounds"]["picked_round"] = pick + 1
        merged.append(rec)
    return merged


# ---------------------------------------------------------------------------
# The busy process of the contention mode


class BusyProcess(object):
    """One CPU-bound loop in its own process group, for the length of a with block.

        with BusyProcess() as busy:
            ...                      # runs while one core is kept busy
        busy.cpu_seconds             # the CPU time it used (proof that it ran)
    """

    CODE = "while True: pass"

    def __init__(self):
        self.proc = None
        self.cpu_seconds = None
        self.seconds = None

    def __enter__(self):
        self._t0 = time.time()
        self.proc = subprocess.Popen([sys.executable, "-c", self.CODE],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        return self

    def __exit__(self, *exc):
        self.cpu_seconds = _cpu_seconds(self.proc.pid)
        self.seconds = round(time.time() - self._t0, 2)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait(timeout=10)
        return False

    def describe(self):
        return {"busy_process": self.CODE, "seconds": self.seconds,
                "cpu_seconds": self.cpu_seconds}


def _cpu_seconds(pid):
    """utime + stime of a running process from /proc (None where unreadable)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return round((int(fields[11]) + int(fields[12])) / float(os.sysconf("SC_CLK_TCK")), 2)
    except (OSError, ValueError, IndexError):
        return None

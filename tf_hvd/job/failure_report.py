"""How a function launcher (tf_hvd.run, tf_hvd.spark, tf_hvd.ray) names a failed job, as
tfhvdrun does: the rank whose failure came first, with its host and pid, then the ranks
that stopped in consequence; from structured records only (the cores' fault records and
how each rank ended), never from the words of an error message.

    >>> ends = {0: RankEnd(0, "h1", 11, raised=("b", "UnavailableError", "...", "")),
    ...         1: RankEnd(1, "h2", 12, signal=9)}
    >>> records = {0: FaultRecord(1, "lost", "rank 1 (on h2) exited or crashed")}
    >>> first_line(ends, records)
    'rank 1 (on h2, pid 12) was killed by signal 9 (SIGKILL); rank 0 stopped in consequence'

The error to raise (``job_error``): the root rank's own exception type where its function
raised (its traceback as the cause), else ``internal_error`` (HorovodInternalError).
"""

import collections
import pickle
import signal as signals

from . import silent_ranks
from .fault_record import FaultRecord, culprits_named, follow  # noqa: F401 - FaultRecord: doctest
from .rank_names import rank_list, who

STILL_RAN = "while the other ranks still ran collectives"


class RankEnd(collections.namedtuple("RankEnd", ["rank", "host", "pid", "raised", "signal",
                                                 "exit_code", "died", "ok"])):
    """How one rank ended, as its launcher saw it. raised: a rank_function.Raised (or its
    tuple); signal / exit_code: how its process ended; died: the launcher's words where it
    knows no more ('lost its Ray worker process (...)'); ok: its function returned."""

    __slots__ = ()

    def __new__(cls, rank, host=None, pid=None, raised=None, signal=None, exit_code=None,
                died=None, ok=False):
        return super(RankEnd, cls).__new__(cls, rank, host, pid, raised, signal, exit_code,
                                           died, ok)

    @property
    def failed(self):
        return not self.ok and (self.raised is not None or self.signal is not None or
                                bool(self.exit_code) or self.died is not None)


def root_cause(ends, records):
    """The rank whose failure came first: one the others' cores declared silent; else the
    rank their records lead to; else the lowest that failed by itself (it raised or its
    process died, and no record of its own names another rank). None if none failed."""
    silent = silent_ranks.silent(records)
    if silent:
        return min(silent)
    failed = sorted(r for r, end in ends.items() if end.failed)
    named = culprits_named(records)
    leads = [follow(r, records) for r in failed + sorted(records)]
    leads = sorted({r for r in leads if r in named}, key=lambda r: (-leads.count(r), r))
    if leads:
        return leads[0]
    own = [r for r in failed if records.get(r) is None or records[r].culprit < 0]
    for kind in ("raised", "signal", "exit_code", "died"):
        first = [r for r in own if getattr(ends[r], kind)]
        if first:
            return first[0]
    return failed[0] if failed else None


# What the others' cores say of a root rank its launcher saw nothing of.
_CORE_KINDS = {"shutdown": "called hvd.shutdown() " + STILL_RAN,
               "exiting": "returned " + STILL_RAN,
               "lost": "left the job (its connection to the others closed)"}


def how(end, records=None):
    """What the rank did: 'raised KeyError: ...', 'was killed by signal 9 (SIGKILL)'."""
    if end.raised is not None:
        return "raised %s: %s" % (end.raised[1], end.raised[2])
    if end.signal:
        try:
            name = signals.Signals(end.signal).name
        except ValueError:
            name = "signal %d" % end.signal
        return "was killed by signal %d (%s)" % (end.signal, name)
    if end.exit_code:
        return "exited with code %d" % end.exit_code
    if end.died:
        return end.died
    records = records or {}
    kind = next((records[r].kind for r in sorted(records)
                 if records[r].culprit == end.rank), "")
    return _CORE_KINDS.get(kind, "failed (its peers' cores say: %s)" % (kind or "nothing"))


def first_line(ends, records, killed=(), label="rank"):
    """'rank R (on HOST, pid P) <how it failed>; ranks ... stopped in consequence'.

    ``killed``: ranks the launcher killed (a silent rank: 'and was killed (SIGKILL)');
    ``label``: 'worker' where the launcher numbers workers, not ranks (elastic Ray)."""
    root = root_cause(ends, records)
    if root is None:
        return None
    end = ends.get(root) or RankEnd(root)
    silent = silent_ranks.silent(records)
    if root in silent:
        text = silent_ranks.describe(root, -9 if root in killed else None, silent[root],
                                     end.pid)
    else:
        text = "%s %s" % (who(root, end.host, end.pid, label), how(end, records))
    others = sorted(r for r, e in ends.items() if r != root and not e.ok)
    if others:
        text += "; %s stopped in consequence" % rank_list(others)
    return text


class RemoteTraceback(Exception):
    """The traceback of a rank's exception, as text (the cause of the driver's error)."""

    def __str__(self):
        return "\n" + self.args[0]


def job_error(ends, records, internal_error, killed=(), note="", label="rank"):
    """The exception for a failed job: the root rank's own type where it raised, else
    ``internal_error``; its message the first line (then ``note``, if any)."""
    root = root_cause(ends, records)
    message = first_line(ends, records, killed, label) + (("\n" + note) if note else "")
    return error_for(ends[root].raised if root in ends else None, message, internal_error)


def error_for(raised, message, internal_error):
    """``message`` as an exception: the type of ``raised`` (a Raised record, or None) where
    it loads here, else ``internal_error`` (RuntimeError for another type that does not);
    the rank's traceback as its cause."""
    error = None
    if raised is not None and raised[0] is not None:
        try:
            error = type(pickle.loads(raised[0]))(message)
        except Exception:  # noqa: BLE001 - a type that needs other arguments
            error = None
    if error is None:
        error = internal_error(message) if raised is None or \
            raised[1] == internal_error.__name__ else RuntimeError(message)
    if raised is not None and raised[3]:
        error.__cause__ = RemoteTraceback(raised[3])
    return error

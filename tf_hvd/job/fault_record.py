"""The structured fault record: what one rank's failure was, read the same way by every
launcher (tfhvdrun, tf_hvd.run, tf_hvd.spark, tf_hvd.ray).

A rank's core that stops because of another rank writes "culprit=<rank>\\nkind=<kind>\\n
<message>" under ``tf_hvd/fault/<rank>`` in the job's rendezvous store (or to its fault
file under mpiexec; cc/common/core/fault_record.h). The launcher adds what the core does
not know: where the rank ran (host, pid) and how its process ended (signal or exit code).
Kinds: the core's ("error", "lost", "stall", "shutdown", "exiting", "silent") and the
launcher's ("raised": the rank's function raised; "died": its process ended without a
word). Following the culprits from any failed rank leads to the root cause.

    >>> rec = parse("culprit=1\\nkind=lost\\nrank 1 (on h2) exited or crashed", rank=0)
    >>> rec.culprit, rec.kind, rec.rank
    (1, 'lost', 0)
    >>> follow(0, {0: rec})
    1
"""

import collections

PREFIX = "tf_hvd/fault/"  # the core's keys in the rendezvous store (scope "tf_hvd")

_FIELDS = ["culprit", "kind", "message", "rank", "host", "pid", "signal", "exit_code"]


class FaultRecord(collections.namedtuple("FaultRecord", _FIELDS)):
    """culprit: the rank blamed (-1: none, the rank failed by itself); rank: whose record;
    signal / exit_code: how its process ended, where known (None otherwise)."""

    __slots__ = ()

    def __new__(cls, culprit, kind, message, rank=None, host=None, pid=None, signal=None,
                exit_code=None):
        return super(FaultRecord, cls).__new__(cls, culprit, kind, message, rank, host,
                                               pid, signal, exit_code)


def parse(data, rank=None):
    """A FaultRecord from a core's report (bytes or str), or None if malformed."""
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    head = data.split("\n", 2)
    if len(head) < 2 or not head[0].startswith("culprit=") or not head[1].startswith("kind="):
        return None
    try:
        culprit = int(head[0][len("culprit="):])
    except ValueError:
        return None
    return FaultRecord(culprit, head[1][len("kind="):], head[2] if len(head) > 2 else "",
                       rank=rank)


def from_store(store):
    """rank -> FaultRecord of every core's report in ``store`` (anything with ``keys()``
    and ``get(key)``: the rendezvous server's KVStore)."""
    records = {}
    for key in list(store.keys()):
        if key.startswith(PREFIX) and key[len(PREFIX):].isdigit():
            rank = int(key[len(PREFIX):])
            record = parse(store.get(key) or b"", rank)
            if record is not None:
                records[rank] = record
    return records


def follow(rank, records):
    """From ``rank``, follow "stopped because of rank c" to the rank that failed by itself."""
    seen = {rank}
    while True:
        rec = records.get(rank)
        if rec is None or rec.culprit < 0 or rec.culprit in seen:
            return rank
        rank = rec.culprit
        seen.add(rank)


def blamed_by(rank, records):
    """The kind of the first record that names ``rank`` as its culprit ('' if none)."""
    for r in sorted(records):
        if records[r].culprit == rank:
            return records[r].kind
    return ""


def culprits_named(records):
    """Ranks that other ranks' records name as the cause of their failure."""
    return {rec.culprit for r, rec in records.items() if rec.culprit >= 0 and rec.culprit != r}

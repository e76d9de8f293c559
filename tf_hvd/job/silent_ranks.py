"""Ranks that stopped answering: what the others' cores reported and how the launcher
names them.

A rank whose core sent no liveness proof for HOROVOD_PEER_TIMEOUT_SECONDS is declared lost
by its peers (cc/common/core/liveness_monitor.h). Their fault records (fault_record.py) name
it with the kind ``silent`` and a message that starts with "rank N (on HOST) stopped
answering: its core sent no liveness proof for T s (...)". Such a rank never ends by
itself (it is stopped, or its host is cut off), so the launcher's policy kills it at once
(a remote rank: its ssh session, abandoning the host if it is unreachable) instead of
waiting for it, and names it so:

    >>> from tf_hvd.job.fault_record import FaultRecord
    >>> rec = FaultRecord(1, "silent", "rank 1 (on h2) stopped answering: its core sent "
    ...                   "no liveness proof for 20 s (HOROVOD_PEER_TIMEOUT_SECONDS=20)")
    >>> sorted(silent({0: rec}))
    [1]
    >>> describe(1, -9, rec, pid=4242)
    'rank 1 (on h2, pid 4242) stopped answering (its core sent no liveness proof for 20 s) and was killed (SIGKILL)'
"""

import re
import socket

from .rank_names import who

KIND = "silent"
_PROOF = re.compile(r"no liveness proof for (\S+ s)")
_HOST = re.compile(r"rank \d+ \(on ([^)]*)\) stopped answering")
_DEAF = re.compile(r"received no liveness proof from this rank for (\S+ s)")

def silent(records, here=None):
    """rank -> the record (of the lowest reporting rank) that declared it silent.

    A partition seen from both sides (each side's records reached the launcher, e.g.
    through a shared file system) names both: the rank with fewer accusers, then the one
    on a host in ``here`` (the launcher's own names), then the lower rank is taken for
    the side still connected, and is left out."""
    here = _this_machine() if here is None else here
    accusers, first = {}, {}
    for reporter in sorted(records):
        rec = records[reporter]
        if rec.kind == KIND and rec.culprit >= 0 and rec.culprit != reporter:
            accusers.setdefault(rec.culprit, []).append(reporter)
            first.setdefault(rec.culprit, rec)

    def weight(rank):  # larger: more surely the one cut off
        return (len(accusers[rank]), _host(rank, first[rank]) not in here, rank)

    return {rank: rec for rank, rec in first.items()
            if not any(rank in accusers.get(r, ()) and weight(r) > weight(rank)
                       for r in accusers[rank])}


def accused(records):
    """Every rank some record declared silent (both sides of a partition included)."""
    return {rec.culprit for r, rec in records.items()
            if rec.kind == KIND and rec.culprit >= 0 and rec.culprit != r}


def _this_machine():
    return {"localhost", "127.0.0.1", socket.gethostname()}


def _host(rank, record):
    """The host the record's message names for ``rank`` ('' if none)."""
    head = "rank %d (on " % rank
    if record.message.startswith(head):
        return record.message[len(head):].split(")", 1)[0]
    return ""


def describe(rank, returncode, record, pid=None):
    """'rank 1 (on h2, pid 4242) stopped answering (its core sent no liveness proof for
    20 s)', plus ' and was killed (SIGKILL)' when the launcher killed it (returncode -9)."""
    host = _HOST.match(record.message)  # where it runs, as the peers' cores name it
    proof, deaf = _PROOF.search(record.message), _DEAF.search(record.message)
    if proof:
        why = "its core sent no liveness proof for " + proof.group(1)
    elif deaf:  # its proofs arrived, the others' did not reach it
        why = "it received no liveness proof from the others for %s: one-way loss" % \
            deaf.group(1)
    else:
        why = "no liveness proof came from its core"
    text = "%s stopped answering (%s)" % (who(rank, host.group(1) if host else None, pid),
                                          why)
    if returncode == -9:
        text += " and was killed (SIGKILL)"
    return text

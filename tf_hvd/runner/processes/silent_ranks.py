"""Ranks that stopped answering: what the others' cores reported and how the launcher
names them.

A rank whose core sent no liveness proof for HOROVOD_PEER_TIMEOUT_SECONDS is declared lost
by its peers (cc/common/core/liveness_monitor.h). Their fault records (failures.py) name
it with the kind ``silent`` and a message that starts with "rank N (on HOST) stopped
answering: its core sent no liveness proof for T s (...)". Such a rank never ends by
itself (it is stopped, or its host is cut off), so the launcher's policy kills it at once
(a remote rank: its ssh session, abandoning the host if it is unreachable) instead of
waiting for it, and names it so:

    >>> rec = FaultRecord(1, "silent", "rank 1 (on h2) stopped answering: its core sent "
    ...                   "no liveness proof for 20 s (HOROVOD_PEER_TIMEOUT_SECONDS=20)")
    >>> sorted(silent({0: rec}))
    [1]
    >>> describe(1, -9, rec)
    'rank 1 (on h2) stopped answering (its core sent no liveness proof for 20 s) and was killed (SIGKILL)'
"""

import collections
import re

KIND = "silent"
_PROOF = re.compile(r"no liveness proof for (\S+ s)")

# As failures.FaultRecord (kept apart so that this module imports nothing of the launcher).
FaultRecord = collections.namedtuple("FaultRecord", ["culprit", "kind", "message"])


def silent(records):
    """rank -> the record (of the lowest reporting rank) that declared it silent."""
    out = {}
    for reporter in sorted(records):
        rec = records[reporter]
        if rec.kind == KIND and rec.culprit >= 0 and rec.culprit != reporter:
            out.setdefault(rec.culprit, rec)
    return out


def describe(rank, returncode, record):
    """'rank 1 (on h2) stopped answering (its core sent no liveness proof for 20 s)', plus
    ' and was killed (SIGKILL)' when the launcher killed it (returncode -9)."""
    who = "rank %d" % rank
    head = record.message.split(" stopped answering", 1)[0]
    if head.startswith(who):
        who = head  # with its host, as the peers' cores name it
    proof = _PROOF.search(record.message)
    text = "%s stopped answering (%s)" % (
        who, "its core sent no liveness proof for " + proof.group(1) if proof
        else "no liveness proof came from its core")
    if returncode == -9:
        text += " and was killed (SIGKILL)"
    return text

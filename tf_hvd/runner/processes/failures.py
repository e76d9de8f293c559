"""Which rank broke the job: the one the launcher names when a job fails.

The first rank to *exit* with an error is not always the one that caused the failure.
When rank 0 raises an exception, its interpreter still has to shut TensorFlow and
tf_hvd down (and MPI_Finalize may wait for the others) before the process ends; the
other ranks meanwhile see their collectives fail and may exit first. So the launcher
looks at two times per rank:

* when it printed ``Traceback (most recent call last):`` on stderr, if it did (an
  uncaught Python exception prints this before the interpreter shuts down);
* when it exited.

A rank's failure time is the earlier of the two for a rank that exited with a
non-zero status of its own. A rank that ended by a signal is taken as failing at its
exit only if no rank exited before it (killed first: the OOM killer, a crash, a user);
a signal that came after another rank had exited is the job being torn down (by the
launcher or by mpiexec), so such a rank counts only if it printed a traceback before.
The rank with the earliest failure time is named (ties: the lowest rank).
"""

import collections

from . import silent_ranks
from .signals import signal_name

TRACEBACK_LINE = b"Traceback (most recent call last):"

# returncode: as subprocess (negative: killed by that signal); times: any common clock.
Outcome = collections.namedtuple("Outcome", ["rank", "host", "returncode", "exit_time",
                                             "traceback_time"])


def is_traceback_line(line):
    return line.startswith(TRACEBACK_LINE)


def failure_time(outcome, first_exit_time):
    """When ``outcome``'s rank failed by itself, or None if it did not (see above)."""
    if outcome.returncode == 0 or outcome.returncode is None:
        return None
    if outcome.returncode < 0:
        if outcome.exit_time is not None and outcome.exit_time <= first_exit_time:
            return outcome.exit_time
        return outcome.traceback_time
    times = [t for t in (outcome.traceback_time, outcome.exit_time) if t is not None]
    return min(times) if times else None


def first_failure(outcomes):
    """The Outcome of the rank that failed first, or None if no rank failed."""
    failed = [o for o in outcomes if o.returncode not in (0, None) and o.exit_time is not None]
    if not failed:
        return None
    first_exit = min(o.exit_time for o in failed)
    timed = [(failure_time(o, first_exit), o.rank, o) for o in failed]
    timed = [t for t in timed if t[0] is not None]
    if not timed:  # cannot happen (the first exit always has a time); be safe
        return min(failed, key=lambda o: (o.exit_time, o.rank))
    return min(timed, key=lambda t: (t[0], t[1]))[2]


def describe_status(returncode):
    """'exited with code 3' / 'was killed by signal 9 (SIGKILL)'."""
    if returncode < 0:
        return "was killed by signal %d (%s)" % (-returncode, signal_name(-returncode))
    return "exited with code %d" % returncode


def exit_code_for(returncode):
    """The launcher's exit status for a process's ``returncode`` (128+N: signal N)."""
    return returncode if returncode >= 0 else 128 - returncode


def describe(outcome, first_exit_time=None):
    """'rank 2 (on node1) exited with code 1', naming how the rank failed."""
    who = "rank %d" % outcome.rank
    if outcome.host:
        who += " (on %s)" % outcome.host
    if outcome.returncode < 0 and first_exit_time is not None and \
            outcome.exit_time is not None and outcome.exit_time > first_exit_time:
        # chosen for its traceback; the signal was the job being torn down
        return "%s raised an exception (its traceback is above) and was then stopped" % who
    text = "%s %s" % (who, describe_status(outcome.returncode))
    if outcome.traceback_time is not None and outcome.returncode > 0:
        text += " after raising an exception (its traceback is above)"
    return text


# -- what the ranks' cores reported ----------------------------------------------------------
#
# A rank whose core stopped because of another rank (it called hvd.shutdown(), its process
# was exiting, its connection closed, ...) tells the launcher which one, through the
# rendezvous store (cc/common/core/fault_record.h, FaultRecord): the text
# "culprit=<rank>\nkind=<kind>\n<its error message>". Following these records from any
# failed rank leads to the rank that failed by itself, whatever the timing.

FaultRecord = collections.namedtuple("FaultRecord", ["culprit", "kind", "message"])

STILL_RAN = "while the other ranks still ran collectives"


def parse_record(data):
    """A FaultRecord from a rank's report (bytes or str), or None if malformed."""
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    head = data.split("\n", 2)
    if len(head) < 2 or not head[0].startswith("culprit=") or not head[1].startswith("kind="):
        return None
    try:
        culprit = int(head[0][len("culprit="):])
    except ValueError:
        return None
    return FaultRecord(culprit, head[1][len("kind="):], head[2] if len(head) > 2 else "")


def follow_records(rank, records):
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


def blame(outcomes, records):
    """(root, consequences, first_exit): the Outcome of the rank whose failure came first,
    the ranks that failed or were stopped because of it, and the first failing exit time.

    ``outcomes``: every rank's Outcome (returncode None: never ended); ``records``: rank ->
    FaultRecord. None when no rank failed.
    """
    start = first_failure(outcomes)
    if start is None:
        return None
    failed_exits = [o.exit_time for o in outcomes
                    if o.returncode not in (0, None) and o.exit_time is not None]
    first_exit = min(failed_exits)
    by_rank = {o.rank: o for o in outcomes}
    root_rank = follow_records(start.rank, records)
    named = culprits_named(records)
    if root_rank not in named:
        # The first failure left no record (a survivor whose exit came first, its report
        # not written): a rank the others' records lead to is the better answer.
        leads = [follow_records(o.rank, records) for o in outcomes
                 if o.returncode not in (0, None)]
        leads = sorted({r for r in leads if r in named},
                       key=lambda r: (-leads.count(r), r))
        if leads:
            root_rank = leads[0]
    silent = silent_ranks.silent(records)
    if silent and root_rank not in silent and root_rank in silent_ranks.accused(records):
        root_rank = min(silent)  # the still connected side of a partition seen from both
    root = by_rank.get(root_rank)
    if root is None:  # a silent rank may never end (its host cut off, under mpiexec)
        root = Outcome(root_rank, None, None, None, None) \
            if root_rank in silent else start
    consequences = sorted(o.rank for o in outcomes
                          if o.rank != root.rank and o.returncode not in (0, None))
    return root, consequences, first_exit


def rank_list(ranks):
    """'rank 2' / 'ranks 0, 2'."""
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def _own_signal(root, records):
    """A root killed by a signal that the others' records name as the cause and that
    printed no traceback died by itself (a SIGKILL on a remote host whose status came
    after the others' exits), not in the job's teardown."""
    return root.returncode is not None and root.returncode < 0 and \
        root.traceback_time is None and root.rank in culprits_named(records or {})


def describe_blame(root, consequences, first_exit, records):
    """One line: how the root rank failed, and which ranks stopped in consequence."""
    kind = blamed_by(root.rank, records)
    torn_down = root.returncode is not None and root.returncode < 0 and \
        root.exit_time is not None and root.exit_time > first_exit
    who = "rank %d" % root.rank + (" (on %s)" % root.host if root.host else "")
    silent = silent_ranks.silent(records or {})
    if root.rank in silent:
        text = silent_ranks.describe(root.rank, root.returncode, silent[root.rank])
    elif kind == "shutdown":
        text = "%s called hvd.shutdown() %s" % (who, STILL_RAN)
        if torn_down or root.returncode is None:
            text += " and was then stopped"
        else:
            text += " and then %s" % describe_status(root.returncode)
    elif kind == "exiting" and root.returncode == 0:
        text = "%s exited with code 0 %s" % (who, STILL_RAN)
    elif _own_signal(root, records):
        text = "%s %s" % (who, describe_status(root.returncode))
    else:
        text = describe(root, first_exit)
    if consequences:
        text += "; %s stopped in consequence" % rank_list(consequences)
    return text


def exit_code_of(root, first_failed_code, first_exit, records=None):
    """The launcher's exit status: the root rank's own code, else the first failure's."""
    code = root.returncode
    own = code is not None and (code > 0 or (code < 0 and root.exit_time is not None and
                                             root.exit_time <= first_exit))
    own = own or _own_signal(root, records)
    if not own:
        code = first_failed_code
    return code if code >= 0 else 128 - code

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

from tf_hvd.job import fault_record, silent_ranks
from tf_hvd.job.fault_record import FaultRecord  # noqa: F401 - the launcher's name for it
from tf_hvd.job.rank_names import rank_list, who
from .signals import signal_name

TRACEBACK_LINE = b"Traceback (most recent call last):"

# returncode: as subprocess (negative: killed by that signal); times: any common clock.
# pid: the rank's process where the launcher started it on this machine (else None).
Outcome = collections.namedtuple("Outcome", ["rank", "host", "returncode", "exit_time",
                                             "traceback_time", "pid"])
Outcome.__new__.__defaults__ = (None,)


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


def describe(outcome, first_exit_time=None, with_pid=False):
    """'rank 2 (on node1) exited with code 1', naming how the rank failed (with_pid: the
    root cause of a failed job, 'rank 2 (on node1, pid 4242) ...', as every launcher)."""
    name = who(outcome.rank, outcome.host, outcome.pid if with_pid else None)
    if outcome.returncode < 0 and first_exit_time is not None and \
            outcome.exit_time is not None and outcome.exit_time > first_exit_time:
        # chosen for its traceback; the signal was the job being torn down
        return "%s raised an exception (its traceback is above) and was then stopped" % name
    text = "%s %s" % (name, describe_status(outcome.returncode))
    if outcome.traceback_time is not None and outcome.returncode > 0:
        text += " after raising an exception (its traceback is above)"
    return text


# -- what the ranks' cores reported ----------------------------------------------------------
#
# A rank whose core stopped because of another rank tells the launcher which one, in a
# fault record (tf_hvd.job.fault_record, shared by every launcher). Following these
# records from any failed rank leads to the rank that failed by itself, whatever the timing.

STILL_RAN = "while the other ranks still ran collectives"
parse_record = fault_record.parse
follow_records = fault_record.follow
blamed_by = fault_record.blamed_by
culprits_named = fault_record.culprits_named


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
    name = who(root.rank, root.host, root.pid)
    silent = silent_ranks.silent(records or {})
    if root.rank in silent:
        text = silent_ranks.describe(root.rank, root.returncode, silent[root.rank], root.pid)
    elif kind == "shutdown":
        text = "%s called hvd.shutdown() %s" % (name, STILL_RAN)
        if torn_down or root.returncode is None:
            text += " and was then stopped"
        else:
            text += " and then %s" % describe_status(root.returncode)
    elif kind == "exiting" and root.returncode == 0:
        text = "%s exited with code 0 %s" % (name, STILL_RAN)
    elif _own_signal(root, records):
        text = "%s %s" % (name, describe_status(root.returncode))
    else:
        text = describe(root, first_exit, with_pid=True)
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

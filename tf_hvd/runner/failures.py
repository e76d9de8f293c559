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

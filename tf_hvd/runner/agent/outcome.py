"""What one run of a job ended with: the launcher's exit code, whether running it again
may help, and why it failed.

One value instead of a tuple, so that every way a run can end (a rank failed, the
rendezvous could not start, a rank could not be started in time) returns the same
shape and a caller cannot unpack one of them wrongly.

    >>> RunOutcome(1, restartable=True, why="rank 1 exited with code 1").failed
    True
    >>> RunOutcome.ok().code
    0
"""

import collections


class RunOutcome(collections.namedtuple("RunOutcome", ["code", "restartable", "why"])):
    """(code, restartable, why): the exit code (0: every rank succeeded), whether a
    restart with a fresh rendezvous may help (a rank failed; not a signal, a usage
    error or a start-up timeout), and the failure's one-line report (or None)."""

    __slots__ = ()

    def __new__(cls, code, restartable=False, why=None):
        return super(RunOutcome, cls).__new__(cls, int(code), bool(restartable), why)

    @classmethod
    def ok(cls):
        """Every rank succeeded."""
        return cls(0)

    @property
    def failed(self):
        return self.code != 0

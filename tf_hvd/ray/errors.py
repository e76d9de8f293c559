"""Turning what Ray reports about failed actor calls into the error every launcher raises
(tf_hvd.job.failure_report): the root-cause rank first, with its host and pid, then the
ranks that stopped in consequence; the rank's own exception type where its function
raised, else HorovodInternalError.

    >>> rank_end(1, "10.0.0.2", 4242, ValueError("bad shard")).raised[1:3]
    ('ValueError', 'bad shard')
"""

import ray

from tf_hvd.exceptions import HorovodInternalError
from tf_hvd.job import failure_report, rank_function


def rank_end(rank, host, pid, error):
    """The RankEnd of a rank whose call failed with ``error`` (what ray.get raised)."""
    if isinstance(error, ray.exceptions.RayActorError):
        return failure_report.RankEnd(rank, host, pid,
                                      died="lost its Ray worker process (%s)"
                                      % _first_line(error))
    cause = error
    if isinstance(error, ray.exceptions.RayTaskError) and \
            getattr(error, "cause", None) is not None:
        cause = error.cause
    raised = rank_function.raised(cause)
    if cause is not error:  # the remote traceback is in Ray's own text
        raised = raised._replace(traceback=str(error))
    return failure_report.RankEnd(rank, host, pid, raised=raised)


def job_error(ends, records, killed=()):
    """The exception for a failed job (failure_report.job_error with HorovodInternalError)."""
    return failure_report.job_error(ends, records, HorovodInternalError, killed)


def worker_error(rank, host, error, label="rank", pid=None):
    """The exception for one failed call on its own (an elastic worker's): 'worker 3 (on
    HOST) raised ValueError: ...' with the function's type, or HorovodInternalError."""
    return failure_report.job_error({rank: rank_end(rank, host, pid, error)}, {},
                                    HorovodInternalError, label=label)


def _first_line(error):
    lines = [l for l in str(error).splitlines() if l.strip()]
    return lines[0][:300] if lines else type(error).__name__

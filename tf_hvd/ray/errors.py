"""Turning what Ray reports about a failed actor call into an error naming the rank."""

import ray

from tf_hvd.exceptions import HorovodInternalError


def worker_error(rank, host, error, label="rank"):
    """The exception to raise in the driver for rank ``rank``'s failed call.

    A function that raised keeps its type (``ValueError`` stays ``ValueError``) with
    ``rank R (on HOST):`` in front of its message; the remote traceback stays attached
    as the cause. A worker whose process died gives HorovodInternalError.
    """
    where = "%s %d (on %s)" % (label, rank, host)
    if isinstance(error, ray.exceptions.RayTaskError):
        cause = error.cause if getattr(error, "cause", None) is not None else error
        message = "%s: %s: %s" % (where, type(cause).__name__, cause)
        try:
            new = type(cause)(message)
        except Exception:  # noqa: BLE001 - a type that needs other arguments
            new = RuntimeError(message)
        new.__cause__ = error
        return new
    if isinstance(error, ray.exceptions.RayActorError):
        return HorovodInternalError("%s: its Ray worker process died (%s)"
                                    % (where, _first_line(error)))
    return RuntimeError("%s: %s: %s" % (where, type(error).__name__, _first_line(error)))


def _first_line(error):
    lines = [l for l in str(error).splitlines() if l.strip()]
    return lines[0][:300] if lines else type(error).__name__

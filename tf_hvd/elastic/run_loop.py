"""``@hvd.elastic.run``: run the training function, and after a lost rank (or added
hosts) roll its state back, re-form the job and run it again.

    @hvd.elastic.run
    def train(state):
        ...
        state.commit()

    train(state)    # returns when train returns; survives lost ranks
"""

import tensorflow as tf

from tf_hvd.elastic import rounds
from tf_hvd.exceptions import HorovodInternalError, HostsUpdatedInterrupt

# Errors of a collective whose job lost a rank (the core names the rank).
LOST_RANK_ERRORS = (HorovodInternalError, tf.errors.UnavailableError, tf.errors.AbortedError,
                    tf.errors.DeadlineExceededError)


def _cause(error):
    """The line of a failed collective's error that names the lost rank (TensorFlow
    puts its own lines around the core's message)."""
    lines = [l.strip() for l in str(error).splitlines() if l.strip()]
    naming = [l for l in lines if "rank" in l and not l.startswith(("File ", "[[", "Detected"))]
    return ((naming or lines or [type(error).__name__])[0])[:300]


def run(func):
    """Decorator: runs ``func(state, ...)``, and after a lost rank rolls ``state`` back to
    its last commit, re-forms the job with the ranks left and runs ``func`` again."""
    def wrapper(state, *args, **kwargs):
        resets = 0
        while True:
            state.sync()
            rounds.after_sync(state)
            try:
                return func(state, *args, **kwargs)
            except LOST_RANK_ERRORS as e:
                resets += 1
                print("tf_hvd.elastic: a collective failed (%s); rolling back to the last "
                      "commit and re-forming the job (reset %d)"
                      % (_cause(e), resets), flush=True)
                state.restore()
                rounds.reset()
                state.on_reset()
            except HostsUpdatedInterrupt:
                rounds.reset()
                state.on_reset()
    wrapper.__name__ = getattr(func, "__name__", "wrapper")
    wrapper.__doc__ = func.__doc__
    return wrapper

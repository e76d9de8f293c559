"""One rank's process, started by its Spark task:
``python -m tf_hvd.spark.rank_main DIR PPID``.

Runs ``fn(*args, **kwargs)`` from ``DIR/payload.pkl`` (written by the driver, carried in
the task) with the function runner every launcher shares (tf_hvd.job.rank_function) and
writes its pickled return value to ``DIR/ok.pkl``, or, when it raises, ``DIR/error.pkl``
(the pickled Raised record, which the task reads without unpickling the exception).
A process of its own per rank, as Horovod's Spark ranks are: a fresh TensorFlow and
``hvd.init()`` on every run, whatever the Python worker ran before, and the rank's
variables only in its own environment.

The rank dies with its task: it asks the kernel for SIGKILL when the task's process goes
(Spark kills the Python worker of a task it cancels, e.g. when another rank of the
barrier stage failed), so no rank outlives its job.
"""

import os
import signal
import sys

from tf_hvd.job import rank_function
from tf_hvd.job.parent_death import die_with_parent


def main(argv):
    workdir, parent_pid = argv[1], int(argv[2])
    die_with_parent(signal.SIGKILL, parent_pid)
    kind, blob = rank_function.outcome(
        lambda: rank_function.load(os.path.join(workdir, "payload.pkl")))
    name = "ok.pkl" if kind == rank_function.OK else "error.pkl"
    rank_function.write_atomically(os.path.join(workdir, name), blob)
    sys.stdout.flush()
    sys.stderr.flush()
    return 0 if kind == rank_function.OK else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""What each rank runs for ``tf_hvd.runner.run(fn, ...)``:
``python -m tf_hvd.runner.run_task DIR``.

Reads ``DIR/payload`` (the driver's sys.path, then ``fn``, ``args`` and ``kwargs``
serialized with cloudpickle, or pickle where cloudpickle is missing) and runs the
function with the runner every launcher shares (tf_hvd.job.rank_function): its pickled
result goes to ``DIR/result.<rank>``, or, when it raises, the Raised record to
``DIR/error.<rank>`` (both written atomically). A rank that raised prints its traceback
and exits 1, so that tfhvdrun names it as for any failing rank; the driver raises its
exception type with tfhvdrun's line.

    python -m tf_hvd.runner.run_task /tmp/.tf_hvd_run.x1y2   # as tfhvdrun's command
"""

import os
import pickle
import sys

from ..job import rank_function

_RANK_VARS = ("HOROVOD_RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")


def this_rank(environ=None):
    environ = os.environ if environ is None else environ
    for name in _RANK_VARS:
        value = environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return 0


def _payload(directory):
    with open(os.path.join(directory, "payload"), "rb") as f:
        driver_path = pickle.load(f)
        for entry in driver_path:  # so that fn's module imports here as in the driver
            if entry not in sys.path:
                sys.path.append(entry)
        return pickle.load(f)  # cloudpickle's output loads with pickle


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    directory = argv[0]
    kind, blob = rank_function.outcome(lambda: _payload(directory))
    rank = this_rank()
    name = "result" if kind == rank_function.OK else "error"
    rank_function.write_atomically(os.path.join(directory, "%s.%d" % (name, rank)), blob)
    if kind == rank_function.OK:
        return 0
    sys.stderr.write(rank_function.read_raised(blob).traceback)
    sys.stderr.flush()
    return 1


if __name__ == "__main__":
    sys.exit(main())

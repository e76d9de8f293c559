"""What each rank runs for ``tf_hvd.runner.run(fn, ...)``:
``python -m tf_hvd.runner.run_task DIR``.

Reads ``DIR/payload`` (the driver's sys.path, then ``fn``, ``args`` and ``kwargs``
serialized with cloudpickle, or pickle where cloudpickle is missing), calls
``fn(*args, **kwargs)`` and writes the pickled result to ``DIR/result.<rank>``
(atomically). An exception propagates: the rank exits with its traceback and the
launcher names it, as for any failing rank.
"""

import os
import pickle
import sys

from .serialization import serializer

_RANK_VARS = ("HOROVOD_RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")


def this_rank(environ=None):
    environ = os.environ if environ is None else environ
    for name in _RANK_VARS:
        value = environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    directory = argv[0]
    with open(os.path.join(directory, "payload"), "rb") as f:
        driver_path = pickle.load(f)
        for entry in driver_path:  # so that fn's module imports here as in the driver
            if entry not in sys.path:
                sys.path.append(entry)
        fn, args, kwargs = pickle.load(f)  # cloudpickle's output loads with pickle
    result = fn(*args, **kwargs)
    rank = this_rank()
    path = os.path.join(directory, "result.%d" % rank)
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        serializer().dump(result, f)
    os.replace(tmp, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

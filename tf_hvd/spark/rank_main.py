"""One rank's process, started by its Spark task:
``python -m tf_hvd.spark.rank_main DIR PPID``.

Runs ``fn(*args, **kwargs)`` from ``DIR/payload.pkl`` (written by the driver, carried in
the task) and writes its pickled return value to ``DIR/ok.pkl``, or, when it raises,
``DIR/error.pkl``: a pickled tuple (the pickled exception or None, its type's name, its
message, the traceback's text) that the task reads without unpickling the exception.
A process of its own per rank, as Horovod's Spark ranks are: a fresh TensorFlow and
``hvd.init()`` on every run, whatever the Python worker ran before, and the rank's
variables only in its own environment.

The rank dies with its task: it asks the kernel for SIGKILL when the task's process goes
(Spark kills the Python worker of a task it cancels, e.g. when another rank of the
barrier stage failed), so no rank outlives its job.
"""

import ctypes
import os
import pickle
import signal
import sys
import traceback

import cloudpickle

PR_SET_PDEATHSIG = 1
_NOT_LOADED = ("the function could not be loaded in the executor's Python (%s: %s): a "
               "function defined in a module travels by reference, so that module must be "
               "importable on the executors (PYTHONPATH, SparkContext.addPyFile), or "
               "registered with cloudpickle.register_pickle_by_value")


def _die_with_parent(parent_pid):
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the task still kills us on failure
        pass
    if os.getppid() != parent_pid:  # the task went before prctl took effect
        os._exit(1)


def _error_record(error):
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    try:
        blob = cloudpickle.dumps(error)
        pickle.loads(blob)  # it must load on the driver too
    except Exception:  # noqa: BLE001 - an exception that does not pickle: its words only
        blob = None
    return (blob, type(error).__name__, str(error), text)


def _load(workdir):
    try:
        with open(os.path.join(workdir, "payload.pkl"), "rb") as f:
            return pickle.load(f)
    except ImportError as e:
        raise type(e)(_NOT_LOADED % (type(e).__name__, e)) from e


def _outcome(workdir):
    """(file name, bytes): the return value, or the error record."""
    try:
        fn, args, kwargs = _load(workdir)
        value = fn(*args, **kwargs)
    except BaseException as e:  # noqa: BLE001 - reported to the driver, naming the rank
        return "error.pkl", pickle.dumps(_error_record(e))
    try:
        return "ok.pkl", cloudpickle.dumps(value)
    except Exception as e:  # noqa: BLE001 - a return value that does not pickle
        return "error.pkl", pickle.dumps(_error_record(TypeError(
            "the function's return value cannot be pickled: %s: %s" % (type(e).__name__, e))))


def main(argv):
    workdir, parent_pid = argv[1], int(argv[2])
    _die_with_parent(parent_pid)
    name, blob = _outcome(workdir)
    path = os.path.join(workdir, name)
    with open(path + ".tmp", "wb") as f:
        f.write(blob)
    os.rename(path + ".tmp", path)
    sys.stdout.flush()
    sys.stderr.flush()
    return 0 if name == "ok.pkl" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

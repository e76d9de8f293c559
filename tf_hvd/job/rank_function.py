"""The rank side of every function launcher (tf_hvd.run, tf_hvd.spark, tf_hvd.ray): run
the rank's function and keep what came of it, its return value or what it raised, in a
form the driver can read without the rank's modules.

    >>> kind, value = call(lambda x: x + 1, (1,))
    >>> kind, value
    ('ok', 2)
    >>> kind, raised = call(int, ("seven",))
    >>> kind, raised.type_name, raised.message
    ('raised', 'ValueError', "invalid literal for int() with base 10: 'seven'")

A process of its own per rank (tf_hvd.run, Spark) runs ``run_in(directory, ...)``: the
function from a pickled payload, the outcome written atomically next to it.
"""

import collections
import os
import pickle
import traceback

try:  # the function launchers need it; plain pickle covers what is importable by name
    import cloudpickle as _pickler
except ImportError:  # pragma: no cover - cloudpickle is pinned in tools/requirements.txt
    _pickler = pickle

OK, RAISED = "ok", "raised"

# blob: the exception pickled (None when it does not pickle, or not load where it was
# made); the driver rebuilds its type from it and names the rank in front of the message.
Raised = collections.namedtuple("Raised", ["blob", "type_name", "message", "traceback"])

_NOT_LOADED = ("the function could not be loaded in the rank's Python (%s: %s): a "
               "function defined in a module travels by reference, so that module must be "
               "importable where the ranks run (PYTHONPATH, SparkContext.addPyFile), or "
               "registered with cloudpickle.register_pickle_by_value")


def raised(error):
    """The Raised record of ``error`` (with its traceback's text)."""
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    try:
        blob = _pickler.dumps(error)
        pickle.loads(blob)  # it must load on the driver too
    except Exception:  # noqa: BLE001 - an exception that does not pickle: its words only
        blob = None
    return Raised(blob, type(error).__name__, str(error), text)


def call(fn, args=(), kwargs=None):
    """(OK, the return value) or (RAISED, a Raised record): ``fn(*args, **kwargs)``."""
    try:
        return OK, fn(*(args or ()), **(kwargs or {}))
    except BaseException as e:  # noqa: BLE001 - reported to the driver, naming the rank
        return RAISED, raised(e)


def load(path):
    """(fn, args, kwargs) from a payload file, naming a module the rank cannot import."""
    try:
        with open(path, "rb") as f:
            return pickle.load(f)  # cloudpickle's output loads with pickle
    except ImportError as e:
        raise type(e)(_NOT_LOADED % (type(e).__name__, e)) from e


def write_atomically(path, blob):
    """``blob`` at ``path``, whole or not at all (a reader never sees half of it)."""
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(blob)
    os.replace(tmp, path)


def outcome(load_payload):
    """(OK, pickled value) or (RAISED, pickled Raised): ``load_payload()`` gives (fn,
    args, kwargs); a value that does not pickle is a TypeError of the rank's."""
    try:
        fn, args, kwargs = load_payload()
    except BaseException as e:  # noqa: BLE001 - a payload that cannot load is the rank's
        kind, value = RAISED, raised(e)
    else:
        kind, value = call(fn, args, kwargs)
    if kind == RAISED:
        return RAISED, pickle.dumps(tuple(value))
    try:
        return OK, _pickler.dumps(value)
    except Exception as e:  # noqa: BLE001 - a return value that does not pickle
        return RAISED, pickle.dumps(tuple(raised(TypeError(
            "the function's return value cannot be pickled: %s: %s" % (type(e).__name__, e)))))


def read_raised(blob):
    """The Raised record from its pickled form (a plain tuple on the wire)."""
    return Raised(*pickle.loads(blob))

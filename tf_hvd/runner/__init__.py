"""tfhvdrun, the launcher of tf_hvd (Horovod's horovodrun for tf_hvd).

Run it as ``tfhvdrun ...`` or ``python -m tf_hvd.runner ...``, or from Python with
``tf_hvd.runner.run(fn, np=2)`` (also ``tf_hvd.run``, as ``horovod.run``). The package
imports only the standard library (and cloudpickle for ``run``).
"""


def run(func, *args, **kwargs):
    """horovod.run for tf_hvd: runs ``func`` on every rank, returns their results
    (see tf_hvd.runner.run_func.run for the parameters)."""
    from .run_func import run as run_func
    return run_func(func, *args, **kwargs)


def run_commandline(argv=None):
    """Run the launcher with ``argv`` (list, default sys.argv[1:]); return the exit code."""
    from .launch import main
    return main(argv)

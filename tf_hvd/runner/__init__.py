"""tfhvdrun, the launcher of tf_hvd (Horovod's horovodrun for tf_hvd).

Run it as ``tfhvdrun ...`` or ``python -m tf_hvd.runner ...``, or from Python with
``tf_hvd.runner.run(fn, np=2)`` (also ``tf_hvd.run``, as ``horovod.run``). The package
imports only the standard library (and cloudpickle for ``run``).
"""

from .launch import main as _launcher_main
from .run_func import run

__all__ = ["run", "run_commandline"]


def run_commandline(argv=None):
    """Run the launcher with ``argv`` (list, default sys.argv[1:]); return the exit code.

    Example: ``tf_hvd.runner.run_commandline(["-np", "2", "python", "train.py"])``."""
    return _launcher_main(argv)

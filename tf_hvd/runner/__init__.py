"""tfhvdrun, the launcher of tf_hvd (Horovod's horovodrun for tf_hvd).

Run it as ``tfhvdrun ...`` or ``python -m tf_hvd.runner ...``. The package imports
only the standard library.
"""


def run_commandline(argv=None):
    """Run the launcher with ``argv`` (list, default sys.argv[1:]); return the exit code."""
    from .launch import main
    return main(argv)

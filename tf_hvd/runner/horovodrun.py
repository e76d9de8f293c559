"""``horovodrun``, the command of the opt-in tf-hvd-horovod distribution (Horovod's import
names, docs/horovod-names.md): ``tfhvdrun`` under Horovod's name, unless a real Horovod is
installed, whose own ``horovodrun`` pip wrote this one over.

    horovodrun -np 2 python train.py      # the same as tfhvdrun -np 2 python train.py

It is the launcher's; what it shares with the Horovod names (whether a real Horovod is
installed) is in the job contract (tf_hvd.job.real_horovod), which both import.
"""

import sys

from tf_hvd.job.real_horovod import real_horovod
from tf_hvd.runner.launch import main as tfhvdrun_main


def main(argv=None):
    """Runs tfhvdrun with ``argv``; exit code 2, naming both, beside a real Horovod."""
    where = real_horovod()
    if where is not None:
        sys.stderr.write(
            "horovodrun: a real Horovod is installed (%s) beside tf_hvd's Horovod names "
            "(tf-hvd-horovod), and pip wrote this horovodrun over Horovod's. Use one of "
            "them: `pip uninstall tf-hvd-horovod` and reinstall horovod, or "
            "`pip uninstall horovod` to keep tf_hvd's names; tf_hvd's launcher is "
            "tfhvdrun either way.\n" % where)
        return 2
    return tfhvdrun_main(argv)

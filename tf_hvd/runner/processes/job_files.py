"""A stdlib-only module of tf_hvd/job, loaded by its file path: for the launcher's scripts
run by path (rank_wrapper.py, ssh_rank.py), which must not import the tf_hvd package.

    >>> load("rank_names").rank_list([0, 2])
    'ranks 0, 2'
"""

import importlib.util
import os

_JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "job")


def load(name):
    """tf_hvd/job/<name>.py as a module of its own (it must import only the stdlib)."""
    spec = importlib.util.spec_from_file_location("tf_hvd_job_" + name,
                                                  os.path.join(_JOB, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

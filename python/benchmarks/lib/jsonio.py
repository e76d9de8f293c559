"""Result files: the common head of every result (command, machine, versions, commit), and JSON
written atomically.

Nothing here imports TensorFlow or MPI: the driver, the TensorFlow workers and the
mpi4py/numpy workers share it.
"""

import datetime
import json
import os
import sys

from lib.machine import package_versions, git_revision, machine_info
from lib.paths import REPO_ROOT, ensure_dir


def now_iso():
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def run_header(benchmark, args):
    """The common head of every result file."""
    return {"benchmark": benchmark, "created": now_iso(),
            "command": " ".join([os.path.relpath(sys.argv[0], REPO_ROOT)] + sys.argv[1:]),
            "quick": bool(getattr(args, "quick", False)), "np": getattr(args, "np", None),
            "machine": machine_info(), "versions": package_versions(),
            "tf_hvd_git": git_revision()}


def finish_header(header):
    """Adds when the run ended and the load then (other work on the machine skews
    the numbers: compare loadavg at the start and at the end)."""
    header["finished"] = now_iso()
    try:
        header["machine"]["loadavg_end"] = os.getloadavg()
    except OSError:
        header["machine"]["loadavg_end"] = None
    return header



def _json_default(obj):
    # numpy scalars and anything else numeric that json does not know
    for cast in (int, float):
        try:
            return cast(obj)
        except (TypeError, ValueError):
            continue
    return str(obj)


def write_json(path, obj):
    """Writes obj atomically (a reader never sees half a file)."""
    ensure_dir(os.path.dirname(os.path.abspath(path)))
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=False, default=_json_default)
        f.write("\n")
    os.replace(tmp, path)


def read_json(path):
    with open(path) as f:
        return json.load(f)

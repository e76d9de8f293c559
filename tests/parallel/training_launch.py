"""Run a script on N ranks through the tf_hvd launcher, with a hard time limit.

``run(np, transport, script, args, timeout)`` runs
``python -m tf_hvd.runner -np N [--mpi] python script args`` and returns
(returncode, output). When the time limit passes, the launcher and every
process it started are killed and the test fails with the output so far, so a
hang never blocks the suite.
"""

import os
import signal
import subprocess
import sys
import time

import pytest

from collective_launch import base_env

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON = sys.executable
_SCRUB = ("HOROVOD_", "PMI_", "PMIX_", "OMPI_", "HYDRA_", "MPI_LOCALNRANKS", "MPI_LOCALRANKID")


def _env(extra=None):
    return base_env(extra, scrub=_SCRUB)


def _descendants(pid):
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _kill_tree(proc):
    for pid in _descendants(proc.pid) + [proc.pid]:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def run(np_, transport, script, args=(), timeout=240, env=None):
    cmd = [PYTHON, "-m", "tf_hvd.runner", "-np", str(np_)]
    if transport == "mpi":
        cmd.append("--mpi")
    cmd += [PYTHON, script] + [str(a) for a in args]
    t0 = time.time()
    proc = subprocess.Popen(cmd, cwd=REPO, env=_env(env), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_tree(proc)
        out, _ = proc.communicate()
        pytest.fail("timed out after %ds: %s\n%s" % (
            timeout, " ".join(cmd), out.decode(errors="replace")[-20000:]))
    text = out.decode(errors="replace")
    sys.stdout.write("%s: exit %d after %.1fs\n" % (" ".join(cmd), proc.returncode,
                                                    time.time() - t0))
    return proc.returncode, text

"""Run a script on N ranks through the tf_hvd launcher, with a hard time limit.

``run(np, transport, script, args, timeout)`` runs
``python -m tf_hvd.runner -np N [--mpi] python script args`` and returns
(returncode, output). When the time limit passes, the launcher and every
process it started are killed (tests/jobrunner.py) and the test fails with the
output so far, so a hang never blocks the suite.
"""

import re
import sys

import pytest

from jobrunner import PYTHON, REPO, base_env, tfhvdrun_cmd  # noqa: F401
from jobrunner import run as run_command


def run(np_, transport, script, args=(), timeout=240, env=None, hide_optional=True):
    cmd = tfhvdrun_cmd(np_, mpi=transport == "mpi") + [PYTHON, script] + [str(a) for a in args]
    res = run_command(cmd, timeout, env=base_env(env, hide_optional=hide_optional))
    if res.timed_out:
        pytest.fail(res.describe(text=res.output[-20000:]))
    sys.stdout.write("%s: exit %d after %.1fs\n" % (" ".join(cmd), res.returncode, res.seconds))
    return res.returncode, res.output


def assert_training_ok(rc, out, np_, same_counts=True):
    """Every rank of a training worker (training_workers/trainlib.Checks) printed
    ``TRAINING OK <n> checks`` and the job exited 0; with ``same_counts``, every rank
    ran the same number of checks."""
    oks = re.findall(r"\[rank (\d+)\] TRAINING OK (\d+) checks", out)
    failures = [line for line in out.splitlines()
                if "FAIL" in line or "EXCEPTION" in line or "Traceback" in line]
    assert rc == 0 and len(set(r for r, _ in oks)) == np_, (
        "exit code %d, %d of %d ranks OK\n%s\n--- output tail ---\n%s"
        % (rc, len(oks), np_, "\n".join(failures[:40]), out[-8000:]))
    if same_counts:
        counts = set(n for _, n in oks)
        assert len(counts) == 1, "ranks ran different numbers of checks: %s" % (oks,)

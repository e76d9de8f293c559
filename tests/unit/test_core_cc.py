"""Runs the C++ unit tests of the framework-free core (//:core_test), of the
shared-memory allreduce (//:shm_allreduce_test, ranks as threads) and of the
allreduce algorithms and their selection table (//:algorithms_test)."""
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("target", ["core_test", "shm_allreduce_test", "algorithms_test"])
def test_core_cc(target):
    build = subprocess.run([os.path.join(ROOT, "tools", "bazel"), "build", "//:" + target],
                           cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, build.stderr[-4000:]
    run = subprocess.run([os.path.join(ROOT, "bazel-bin", target)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert ", 0 failed" in run.stdout

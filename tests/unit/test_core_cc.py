"""Runs the C++ unit tests of the framework-free core (//:core_test)."""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_core_cc():
    build = subprocess.run([os.path.join(ROOT, "tools", "bazel"), "build", "//:core_test"],
                           cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, build.stderr[-4000:]
    run = subprocess.run([os.path.join(ROOT, "bazel-bin", "core_test")], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert ", 0 failed" in run.stdout

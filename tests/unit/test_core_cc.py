"""Runs every C++ unit test (GoogleTest cc_test targets, e.g. //:core_test and
//:shm_allreduce_test) with `bazel test //...`; a failure shows Bazel's output and the
failing tests' logs.

    tools/bazel test --build_tests_only --test_output=errors //...
"""
import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_bazel_cc_tests_pass():
    env = dict(os.environ)
    # Same interpreter-finding environment as tools/build_lib.sh (the repository rules
    # must see the real venv, not a pytest-modified path).
    for name in ("PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONHOME", "PYTHONSAFEPATH"):
        env.pop(name, None)
    cmd = [os.path.join(ROOT, "tools", "bazel"), "test", "--build_tests_only",
           "--test_output=errors", "//..."]
    try:
        run = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=900)
    except subprocess.TimeoutExpired as e:
        raise AssertionError("`%s` did not finish within 900 s:\n%s" % (
            " ".join(cmd), (e.output or "")[-8000:] if isinstance(e.output, str) else ""))
    assert run.returncode == 0, "`%s` exited %d:\n%s" % (" ".join(cmd), run.returncode,
                                                        run.stdout[-12000:])
    # At least the two suites ran (a glob or rule change must not silently drop them).
    passed = re.findall(r"^(//\S+)\s+(?:\(cached\) )?PASSED", run.stdout, re.M)
    for target in ("//:core_test", "//:shm_allreduce_test"):
        assert target in passed, "%s not reported PASSED:\n%s" % (target, run.stdout[-4000:])

"""Runs every C++ unit test (GoogleTest cc_test targets: //:core_test,
//:shm_allreduce_test, //:algorithms_test, //:subset_transport_test, //:autotune_test) with `bazel test //...`; a failure shows Bazel's output and the
failing tests' logs.

    tools/bazel test --build_tests_only --test_output=errors //...
"""
import os
import re

from jobrunner import REPO, clean_env, run

# Same interpreter-finding environment as tools/build_lib.sh: the repository rules must
# see the real venv, not a test-modified path.
_DROP = ("PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONHOME", "PYTHONSAFEPATH")


def test_bazel_cc_tests_pass():
    env = {k: v for k, v in clean_env().items() if k not in _DROP}
    cmd = [os.path.join(REPO, "tools", "bazel"), "test", "--build_tests_only",
           "--test_output=errors", "//..."]
    res = run(cmd, 900, env=env, cwd=REPO)
    assert res.ok, res.describe(text=res.output[-12000:])
    # Every suite ran (a glob or rule change must not silently drop them).
    passed = re.findall(r"^(//\S+)\s+(?:\(cached\) )?PASSED", res.output, re.M)
    for target in ("//:core_test", "//:shm_allreduce_test", "//:algorithms_test",
                   "//:subset_transport_test", "//:autotune_test"):
        assert target in passed, "%s not reported PASSED\n%s" % (target, res.describe(60))

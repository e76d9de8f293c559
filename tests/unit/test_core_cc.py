"""Runs every C++ unit test (the GoogleTest cc_test targets of the root BUILD) with
`bazel test //...`, a failure showing Bazel's output and the failing tests' logs; and
proves the layers of cc/common are enforced: each probe of tests/unit/cc/layering (code of
one layer reaching for what it may not use) must fail to build with Bazel's own error.

    tools/bazel test --build_tests_only --test_output=errors //...
    tools/bazel build //tests/unit/cc/layering:negotiation_includes_backend   # must fail
"""
import os
import re

import pytest

from jobrunner import REPO, clean_env, run

# Bazel runs one command at a time per workspace: the modules that call it share one
# pytest-xdist worker (tools/run_tests.sh runs tests/unit with --dist loadgroup).
pytestmark = pytest.mark.xdist_group("bazel")

# Same interpreter-finding environment as tools/build/build_lib.sh: the repository rules must
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
    for target in ("//:core_test", "//:shm_collectives_test", "//:algorithms_test",
                   "//:subset_transport_test", "//:autotune_test", "//:entry_checks_test",
                   "//:fault_reporter_test", "//:liveness_monitor_test",
                   "//:process_set_table_test",
                   "//:background_loop_test", "//:transport_choice_test",
                   "//:socket_links_test", "//:crypto_library_test",
                   "//:runtime_library_test"):
        assert target in passed, "%s not reported PASSED\n%s" % (target, res.describe(60))


# Each probe and the error Bazel must refuse it with (tests/unit/cc/layering/BUILD).
PROBES = {
    # A backend's header in negotiation: not in the library's dependency closure.
    "negotiation_includes_backend": "undeclared inclusion(s) in rule "
                                    "'//tests/unit/cc/layering:negotiation_includes_backend'",
    # TensorFlow and pybind11 are on no core library's include path.
    "core_includes_tensorflow": "tensorflow/core/framework/op_kernel.h: No such file or directory",
    "core_includes_pybind11": "pybind11/pybind11.h: No such file or directory",
    # Declaring the backend as a dependency instead: its visibility refuses it.
    "negotiation_depends_on_backend": "target '//cc/common/gloo:gloo' is not visible from target "
                                      "'//tests/unit/cc/layering:negotiation_depends_on_backend'",
}


def test_forbidden_includes_and_dependencies_fail_the_build():
    env = {k: v for k, v in clean_env().items() if k not in _DROP}
    for probe, error in PROBES.items():
        cmd = [os.path.join(REPO, "tools", "bazel"), "build", "//tests/unit/cc/layering:" + probe]
        res = run(cmd, 600, env=env, cwd=REPO)
        assert not res.ok, "%s built, but its layer must refuse it\n%s" % (probe, res.describe(40))
        assert error in res.output, "%s: expected %r\n%s" % (probe, error, res.describe(40))

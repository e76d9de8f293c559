"""The MPI links' pipelined exchange (cc/common/mpi/mpi_links.h), tested in C++ with one
rank per process: builds //:mpi_links_test (GoogleTest, tests/unit/cc/mpi_links_test.cc)
and runs it under the venv's mpiexec at 2 and 3 ranks, each run bounded in time. Every
rank must pass every test: pipelined and plain exchanges move the same bytes, the two
styles interoperate, the Precondition errors, exact ring allreduce sums.

    tools/bazel build //:mpi_links_test && mpiexec -n 3 bazel-bin/mpi_links_test
"""
import os
import xml.etree.ElementTree as ET

import pytest

from jobrunner import REPO, clean_env, mpiexec_cmd, run

# Bazel runs one command at a time per workspace: the modules that call it share one
# pytest-xdist worker (tools/run_tests.sh runs tests/unit with --dist loadgroup).
pytestmark = pytest.mark.xdist_group("bazel")

# The tests of tests/unit/cc/mpi_links_test.cc; every rank must report each one passed.
TESTS = {"PipelinedAndPlainExchangesMoveTheSameBytes", "PreconditionErrors",
         "RingAllreduceExactSums"}


@pytest.fixture(scope="module")
def binary():
    # Same environment as tests/unit/test_core_cc.py: Bazel's repository rules must see
    # the real venv, not a test-modified Python path.
    env = {k: v for k, v in clean_env().items()
           if k not in ("PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONHOME", "PYTHONSAFEPATH")}
    res = run([os.path.join(REPO, "tools", "bazel"), "build", "//:mpi_links_test"], 600,
              env=env, cwd=REPO)
    assert res.ok, res.describe(40)
    return os.path.join(REPO, "bazel-bin", "mpi_links_test")


def _passed(xml_path):
    """Names of the tests that ran and passed, from one rank's GoogleTest XML."""
    passed = set()
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        if case.get("result") == "completed" and case.find("failure") is None:
            passed.add(case.get("name"))
    return passed


@pytest.mark.parametrize("ranks", [2, 3])
def test_mpi_links_pipelined_exchange(binary, ranks, tmp_path):
    # The ranks' console output interleaves: each writes its results to its own XML.
    res = run(mpiexec_cmd(ranks) + [binary, "--xml_dir=%s" % tmp_path], 120, env=clean_env())
    assert res.ok, res.describe()
    for r in range(ranks):
        xml_path = tmp_path / ("rank%d.xml" % r)
        assert xml_path.exists(), "rank %d wrote no results\n%s" % (r, res.describe())
        assert _passed(str(xml_path)) == TESTS, "rank %d\n%s" % (r, res.describe())

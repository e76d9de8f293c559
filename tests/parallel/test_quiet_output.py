"""Quiet by default: a job's output shows the user's lines and tf_hvd's, not
TensorFlow's start-up lines on every rank; --verbose or the user's own
TF_CPP_MIN_LOG_LEVEL shows everything.

First the same program runs bare (no launcher, TensorFlow's defaults) and must print
the start-up lines this test looks for, so that it cannot pass vacuously; then under
tfhvdrun on 2 ranks.
"""

import os
import re
import sys

import pytest

from jobrunner import PYTHON, REPO, clean_env, run

PROGRAM = ("import tensorflow as tf\nimport tf_hvd as hvd\nhvd.init()\n"
           "print('user line', hvd.rank(), float(tf.reduce_sum(tf.ones([3]))))\n")

# TensorFlow's start-up lines (issue 23): absl's preamble, oneDNN's notice,
# cpu_feature_guard, and the failed cuInit on a machine without a GPU.
NOISE = [r"All log messages before absl::InitializeLog\(\) is called",
         r"oneDNN custom operations are on",
         r"cpu_feature_guard\.cc",
         r"failed call to cuInit"]


def _env(**extra):
    env = clean_env()
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    env.update(extra)
    return env


def _noise_in(text):
    return [n for n in NOISE if re.search(n, text)]


@pytest.fixture(scope="module")
def bare_noise():
    res = run([PYTHON, "-c", PROGRAM], 180, env=_env(), cwd=REPO).check_finished()
    assert res.returncode == 0, res.describe()
    found = _noise_in(res.output)
    # absl's preamble appears on every machine; the others depend on the CPU (oneDNN's
    # notice only where TensorFlow turns oneDNN on by default, e.g. with AVX-512) and the GPU.
    assert NOISE[0] in found, res.describe()
    return found


@pytest.mark.parametrize("transport", ["gloo", "mpi"])
def test_start_up_lines_are_hidden_by_default(bare_noise, transport):
    cmd = [PYTHON, "-m", "tf_hvd.runner", "-np", "2"] + (
        ["--mpi"] if transport == "mpi" else []) + [PYTHON, "-c", PROGRAM]
    res = run(cmd, 240, env=_env(), cwd=REPO).check_finished()
    assert res.returncode == 0, res.describe()
    assert sorted(l for l in res.output.splitlines() if "user line" in l) == [
        "[0]<stdout>:user line 0 3.0", "[1]<stdout>:user line 1 3.0"], res.describe()
    assert _noise_in(res.output) == [], res.describe()


@pytest.mark.parametrize("how", ["--verbose", "TF_CPP_MIN_LOG_LEVEL=0"])
def test_verbose_or_the_users_variable_shows_everything(bare_noise, how):
    flags = ["--verbose"] if how == "--verbose" else []
    env = _env(TF_CPP_MIN_LOG_LEVEL="0") if how != "--verbose" else _env()
    res = run([PYTHON, "-m", "tf_hvd.runner", "-np", "2"] + flags + [PYTHON, "-c", PROGRAM],
              240, env=env, cwd=REPO).check_finished()
    assert res.returncode == 0, res.describe()
    assert _noise_in(res.output) == bare_noise, res.describe()
    for rank in (0, 1):  # on every rank, as a bare process prints them
        assert re.search(r"^\[%d\]<stderr>:.*%s" % (rank, NOISE[0]), res.output, re.M), \
            res.describe()

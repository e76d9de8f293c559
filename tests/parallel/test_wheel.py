"""Packaging end to end, the quick form of the release check: the release wheel of the
development Python (tools/build_wheel.sh: the CUDA variant built with Bazel, then auditwheel
repair) passes tools/check_wheels.py (manylinux tag, nothing needed from the machine beyond
glibc, the C++ runtime and TensorFlow, no MPI, CUDA or NCCL linked, TensorFlow pinned in its
metadata), then tools/try_wheel.sh installs it as a non-root user into a fresh venv in a
mount namespace that hides the compiler, Bazel, a system CUDA and the libraries it was built
with, checks that the missing CUDA runtime is reported with what to install, and trains the
digits example at np=2 on Gloo and, after `pip install mpich`, with --mpi.

The wheel is built into a temporary directory (setuptools' build and egg-info directories
too), so the editable install's files in the tree are left as they were.
"""
import hashlib
import os
import re
import sys

import pytest

from jobrunner import PYTHON, REPO, clean_env, run


def _digest(path):
    if not os.path.exists(path):
        return None
    if os.path.isdir(path):
        return sorted((n, _digest(os.path.join(path, n))) for n in os.listdir(path))
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _ok(res, what):
    assert res.ok, "%s failed\n%s" % (what, res.describe(text=res.output[-8000:]))
    sys.stdout.write("%s: %.1f s\n" % (what, res.seconds))  # shown with -s / -rP
    return res


# About 1.5 minutes when the Bazel cache is warm (tools/run_tests.sh builds first) and the
# wheelhouse exists (its first download adds ~20 s); every step has its own limit.
@pytest.mark.timeout(900)
@pytest.mark.skipif(os.geteuid() != 0, reason="the bare-machine check needs root")
def test_release_wheel_is_self_contained_and_trains_in_a_bare_venv_as_a_user(tmp_path):
    untouched = [os.path.join(REPO, "tf_hvd", "_hvd.so"), os.path.join(REPO, "tf_hvd.egg-info")]
    before = [_digest(p) for p in untouched]
    env = {k: v for k, v in clean_env().items() if k not in ("PYTHONPATH", "PYTHONHOME")}

    # 1. The wheel: built, repaired, checked.
    res = _ok(run([os.path.join(REPO, "tools", "build_wheel.sh"), "--python", PYTHON,
                   "--out", str(tmp_path)], 420, cwd=str(tmp_path), env=env), "build_wheel.sh")
    wheels = [n for n in os.listdir(str(tmp_path)) if n.endswith(".whl")]
    assert len(wheels) == 1, os.listdir(str(tmp_path))
    wheel = str(tmp_path / wheels[0])
    import tensorflow as tf
    minor = ".".join(tf.__version__.split(".")[:2])
    assert re.match(r"tf_hvd-[\d.]+\+tf%s-cp%d%d-cp%d%d-manylinux_2_\d+_x86_64\.whl$" % (
        re.escape(minor), *sys.version_info[:2], *sys.version_info[:2]), wheels[0]), wheels[0]
    assert [_digest(p) for p in untouched] == before, "the wheel build changed the source tree"

    res = _ok(run([PYTHON, os.path.join(REPO, "tools", "check_wheels.py"), wheel], 120,
                  env=env), "check_wheels.py")
    assert re.search(r"manylinux_2_\d+_x86_64\s+%s\.\d+\S*\s+yes\s+\d+\s+[\d.]+\s+ok"
                     % re.escape(minor), res.output), res.output

    # 2. Installed and trained as a user would, on a machine without the build's files.
    res = _ok(run([os.path.join(REPO, "tools", "try_wheel.sh"), wheel, "--epochs", "15",
                   "--min-accuracy", "0.95"], 720, cwd=str(tmp_path), env=env), "try_wheel.sh")
    out = res.output
    assert "[try_wheel] as tfhvd-try, with no compiler" in out, out[-4000:]
    assert "[try_wheel] mpi_built: False" in out, out[-4000:]
    assert ("[try_wheel] GPU build without the CUDA runtime: the CUDA runtime "
            "(libcudart.so.12) could not be loaded" in out), out[-4000:]
    assert "[try_wheel] with the mpich wheel, mpi_built: True" in out, out[-4000:]
    accuracies = re.findall(r"tfhvdrun (--mpi )?\s*-np 2 keras_digits\.py: test accuracy "
                            r"([\d.]+)", out)
    assert [m for m, _ in accuracies] == ["", "--mpi "], out[-4000:]
    assert all(float(a) >= 0.95 for _, a in accuracies), accuracies
    assert "%s: ok" % wheels[0] in out

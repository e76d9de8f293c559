"""Packaging end to end, the quick form of the release check, at TensorFlow's floor: the release
wheel for Python 3.9 and TensorFlow 2.20 (tools/release/build_wheel.sh: the CUDA variant built with the
floor toolchain, then auditwheel repair) passes tools/release/check_wheels.py (every ELF file at or
below the glibc/libstdc++ floor, auditwheel's tag, nothing needed from the machine beyond glibc,
the C++ runtime and TensorFlow, no MPI, CUDA or NCCL linked, TensorFlow pinned in its
metadata), then tools/trials/try_wheel_in_root.sh installs it in a Debian 11 root filesystem (bullseye:
glibc 2.31, GCC 10's libstdc++, its own python3.9; debootstrap minbase, no compiler, no -dev
package, no Bazel, cached under ~/.cache/tf_hvd/roots) as that root's non-root user, into a
fresh venv with `pip install tensorflow==2.20.0` from a wheelhouse for the root's tags, checks
the versions, that the missing CUDA runtime is reported with what to install, and trains the
digits example at np=2 on Gloo and, after `pip install mpich`, with --mpi (loopback only).

What it proves: a wheel built from this tree installs with pip alone where TensorFlow installs,
on an older distribution than this machine's, and trains on both transports there. What it does
not: the development Python (cp311) and TensorFlow 2.21 as a wheel (no Debian root has
python3.11; the rest of the suite runs the source build on them), and trixie (Debian 13,
python3.13, TF 2.21), which `tools/trials/try_wheel_in_root.sh --root trixie` proves by hand with the
cp313 wheel. The earlier check in a mount namespace of this machine (tools/trials/try_wheel.sh) is
dropped here: the root holds none of the build's files to begin with, and its glibc is older.

On a machine without a Python 3.9 to build the cp39 wheel with, the same is done with the
cp313 / TF 2.21 wheel in Debian 13 (trixie, glibc 2.41); TF_HVD_TEST_ROOT=trixie chooses that.

The wheel is built into a temporary directory (setuptools' build and egg-info directories
too), so the editable install's files in the tree are left as they were. TF_HVD_TEST_WHEEL=PATH
tries that cp39/TF 2.20 wheel instead of building one (a release pipeline's own wheel).
"""
import hashlib
import os
import re
import subprocess
import sys

import pytest

from jobrunner import PYTHON, REPO, clean_env, run

# (suite, its python3, the TensorFlow minor, its glibc line): Debian 11 with the cp39 wheel, the
# oldest glibc; a machine without a Python 3.9 to build that wheel with tries Debian 13 with
# the cp313 wheel instead (pyenv's interpreters, as tools/release/wheel_matrix.sh finds them).
ROOTS = {"3.9": ("bullseye", "3.9", "2.20", "glibc 2.31 (Debian 11 bullseye)"),
         "3.13": ("trixie", "3.13", "2.21", "glibc 2.41 (Debian 13 trixie)")}


def _have_python(version):
    return subprocess.run(["bash", "-c", 'source "$1"; find_python "$2"', "_",
                           os.path.join(REPO, "tools", "release", "wheel_matrix.sh"), version],
                          capture_output=True).returncode == 0


# TF_HVD_TEST_ROOT=trixie (or bullseye) chooses.
_CHOSEN = {"bullseye": "3.9", "trixie": "3.13"}.get(os.environ.get("TF_HVD_TEST_ROOT", ""))
ROOT_SUITE, ROOT_PYTHON, ROOT_TF, ROOT_GLIBC = ROOTS[
    _CHOSEN or ("3.9" if _have_python("3.9") else "3.13")]
# tools/release/build_wheels.sh's cache: the build venv it keeps for that Python and TensorFlow, and
# the release matrix's Bazel cache (after a matrix build, this wheel's build is a cache hit).
WHEEL_CACHE = os.environ.get("TF_HVD_WHEEL_CACHE") or os.path.expanduser(
    "~/.cache/tf_hvd/wheel-build")
BUILD_VENV = os.path.join(WHEEL_CACHE, "venvs", "cp%s-tf%s" % (ROOT_PYTHON.replace(".", ""),
                                                               ROOT_TF))


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


def _build_wheel(out, env):
    """The cp39 / TF 2.20 release wheel, built from this tree into OUT."""
    untouched = [os.path.join(REPO, "tf_hvd", "_hvd.so"), os.path.join(REPO, "tf_hvd.egg-info")]
    before = [_digest(p) for p in untouched]
    _ok(run([os.path.join(REPO, "tools", "release", "build_wheels.sh"), "--venvs-only", "--python",
             ROOT_PYTHON, "--tf", ROOT_TF], 600, cwd=out, env=env), "build_wheels.sh --venvs-only")
    _ok(run([os.path.join(REPO, "tools", "release", "build_wheel.sh"), "--python",
             os.path.join(BUILD_VENV, "bin", "python"), "--out", out, "--bazel-cache",
             os.path.join(WHEEL_CACHE, "bazel")], 1200, cwd=out, env=env),
        "build_wheel.sh")
    wheels = [n for n in os.listdir(out) if n.endswith(".whl")]
    assert len(wheels) == 1, os.listdir(out)
    assert [_digest(p) for p in untouched] == before, "the wheel build changed the source tree"
    return os.path.join(out, wheels[0])


# Timed on this 2-core machine with other builds running (2026-11-28): the build, with the
# release matrix's Bazel cache warm, 35-100 s; check_wheels 4 s; try_wheel_in_root.sh about
# 3 minutes (the root's pip installs TensorFlow in 45-85 s, each training job takes 12-20 s,
# removing the venv 35-55 s). A first run adds the root (debootstrap, ~1 min, once) and the
# wheelhouse (740 MB, ~45 s, once); a cold floor build is the floor toolchain's (tools/release/floor/).
@pytest.mark.timeout(2400)
@pytest.mark.skipif(os.geteuid() != 0, reason="the root filesystem and its user need root")
def test_release_wheel_installs_and_trains_in_a_debian_root_as_a_user(tmp_path):
    env = {k: v for k, v in clean_env().items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    wheel = os.environ.get("TF_HVD_TEST_WHEEL") or _build_wheel(str(tmp_path), env)
    name = os.path.basename(wheel)
    py = ROOT_PYTHON.replace(".", "")
    m = re.match(r"tf_hvd-[\d.]+\+tf%s-cp%s-cp%s-((manylinux_2_\d+_x86_64\.?)+)\.whl$" % (
        re.escape(ROOT_TF), py, py), name)
    assert m, name
    # pip takes a wheel when any of its tags fits: the lowest is its floor.
    floor = min(int(g) for g in re.findall(r"manylinux_2_(\d+)_", m.group(1)))
    assert floor <= 28, "%s: above the glibc 2.28 floor" % name

    # 1. Its ELF files at the floor, as auditwheel sees them.
    res = _ok(run([PYTHON, os.path.join(REPO, "tools", "release", "check_wheels.py"), wheel], 120,
                  env=env), "check_wheels.py")
    assert re.search(r"^%s\s.*\bok\s*$" % re.escape(name), res.output, re.M), res.output

    # 2. Installed and trained as a user of that Debian would.
    res = _ok(run([os.path.join(REPO, "tools", "trials", "try_wheel_in_root.sh"),
                   "--root", ROOT_SUITE, wheel, "--epochs", "15", "--min-accuracy", "0.95"], 1800, cwd=str(tmp_path),
                  env=env), "try_wheel_in_root.sh")
    out = res.output
    assert "[try_wheel] %s, python3 %s" % (ROOT_GLIBC, ROOT_PYTHON) in out, out[-4000:]
    assert ("[try_wheel] as tfhvd-try in %s (tfhvd-%s, network: lo ), with no compiler"
            % (ROOT_SUITE, ROOT_SUITE) in out), out[-4000:]
    versions = re.search(r"\[try_wheel\] TensorFlow (\S+), tf_hvd (\S+)", out)
    assert versions and versions.group(1).startswith(ROOT_TF + "."), out[-4000:]
    assert versions.group(2).endswith("+tf" + ROOT_TF), versions.group(2)
    assert "[try_wheel] mpi_built: False" in out, out[-4000:]
    assert ("[try_wheel] GPU build without the CUDA runtime: the CUDA runtime "
            "(libcudart.so.12) could not be loaded" in out), out[-4000:]
    assert "[try_wheel] with the mpich wheel, mpi_built: True" in out, out[-4000:]
    accuracies = re.findall(r"tfhvdrun (--mpi )?\s*-np 2 keras_digits\.py: test accuracy "
                            r"([\d.]+)", out)
    assert [m for m, _ in accuracies] == ["", "--mpi "], out[-4000:]
    assert all(float(a) >= 0.95 for _, a in accuracies), accuracies
    assert "%s: ok in %s" % (name, ROOT_SUITE) in out, out[-4000:]

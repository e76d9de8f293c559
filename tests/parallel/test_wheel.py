"""Packaging end to end: ``pip wheel`` builds a wheel from this tree, pip installs it into
a fresh virtual environment that sees the same TensorFlow, and a 2-rank job runs there,
from outside the source tree, with the installed ``tfhvdrun``.

The wheel is built into a temporary directory (setuptools' build and egg-info
directories too, through DIST_EXTRA_CONFIG), so the editable install's files in the
tree (tf_hvd/_hvd.so, tf_hvd.egg-info) are left as they were. The new environment gets
TensorFlow through a .pth file naming this venv's site-packages (reinstalling TensorFlow
would take minutes); tf_hvd itself comes only from the wheel.
"""
import glob
import hashlib
import os
import sys
import sysconfig
import textwrap

import pytest

from jobrunner import PYTHON, REPO, clean_env, run

JOB = """
import os, sys
import tensorflow as tf
import tf_hvd as hvd
assert os.path.realpath(hvd.__file__).startswith(os.path.realpath(sys.argv[1])), hvd.__file__
hvd.init()
total = hvd.allreduce(tf.constant([hvd.rank() + 1.0, 10.0]), op=hvd.Sum)
print("rank %d of %d: %s from %s" % (hvd.rank(), hvd.size(), total.numpy().tolist(),
                                     os.path.dirname(hvd.__file__)))
hvd.shutdown()
"""


def _digest(path):
    if not os.path.exists(path):
        return None
    if os.path.isdir(path):
        return sorted((n, _digest(os.path.join(path, n))) for n in os.listdir(path))
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _env_outside_tree(extra=None):
    """No PYTHONPATH: what is imported must come from the environment's site-packages."""
    env = {k: v for k, v in clean_env().items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(extra or {})
    return env


def _ok(res, what):
    assert res.ok, "%s failed\n%s" % (what, res.describe(text=res.output[-6000:]))
    sys.stdout.write("%s: %.1f s\n" % (what, res.seconds))  # shown with -s / -rP
    return res


# About a minute when the Bazel cache is warm (tools/run_tests.sh builds first); every step
# has its own limit and the whole test at most 10 minutes.
@pytest.mark.timeout(600)
def test_wheel_installs_and_runs_a_job_in_a_fresh_venv(tmp_path):
    untouched = [os.path.join(REPO, "tf_hvd", "_hvd.so"), os.path.join(REPO, "tf_hvd.egg-info")]
    before = [_digest(p) for p in untouched]

    # 1. The wheel, built in a temporary directory.
    wheels, work = tmp_path / "wheels", tmp_path / "build"
    work.mkdir()
    cfg = tmp_path / "setuptools.cfg"
    cfg.write_text("[build]\nbuild_base = %s\n[egg_info]\negg_base = %s\n" % (work, work))
    _ok(run([PYTHON, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index",
             "-q", "-w", str(wheels), REPO], 360, cwd=str(tmp_path),
            env=_env_outside_tree({"DIST_EXTRA_CONFIG": str(cfg), "PIP_NO_INPUT": "1"})),
        "pip wheel")
    built = glob.glob(str(wheels / "tf_hvd-*.whl"))
    assert len(built) == 1, os.listdir(str(wheels))
    assert [_digest(p) for p in untouched] == before, "the wheel build changed the source tree"

    # 2. A fresh venv: TensorFlow (and mpich's libmpi) seen through a .pth, tf_hvd from the wheel.
    venv = tmp_path / "venv"
    # --without-pip (ensurepip is slow); this venv's pip installs into it (--python).
    _ok(run([PYTHON, "-m", "venv", "--without-pip", str(venv)], 180, cwd=str(tmp_path),
            env=_env_outside_tree()), "python -m venv")
    vpy = str(venv / "bin" / "python")
    site = run([vpy, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], 60,
               env=_env_outside_tree()).output.strip().splitlines()[-1]
    with open(os.path.join(site, "outer_tensorflow.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    _ok(run([PYTHON, "-m", "pip", "--python", vpy, "install", "-q", "--no-deps", "--no-index",
             built[0]], 180, cwd=str(tmp_path), env=_env_outside_tree()),
        "pip install of the wheel")
    assert os.path.isfile(os.path.join(site, "tf_hvd", "_hvd.so"))
    assert os.access(str(venv / "bin" / "tfhvdrun"), os.X_OK)

    # 3. A 2-rank job with the installed launcher, from outside the source tree.
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(JOB))
    env = _env_outside_tree({"PATH": str(venv / "bin") + os.pathsep + os.environ["PATH"],
                             "TF_CPP_MIN_LOG_LEVEL": "2", "TF_NUM_INTRAOP_THREADS": "1",
                             "OMP_NUM_THREADS": "1"})
    res = _ok(run([str(venv / "bin" / "tfhvdrun"), "-np", "2", vpy, str(script), str(venv)],
                  180, cwd=str(tmp_path), env=env), "the 2-rank job")
    for r in range(2):
        assert "[%d]<stdout>:rank %d of 2: [3.0, 20.0] from %s" % (
            r, r, os.path.join(site, "tf_hvd")) in res.output, res.describe()

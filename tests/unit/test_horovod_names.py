"""Horovod's import names (the opt-in tf-hvd-horovod wheel): what the wheel holds, that
each of Horovod's public module paths *is* the tf_hvd module, the errors for the modules
tf_hvd does not provide, and that a real Horovod is left alone. Every check runs a fresh
interpreter of a venv into which pip installed the wheel, as a user has it."""

import os
import re
import subprocess
import sys

import pytest

from horovod_names_venv import build_wheel, make_venv, wheel_members
from jobrunner import REPO, clean_env

sys.path.insert(0, REPO)
from tf_hvd import horovod_names  # noqa: E402  (TensorFlow-free)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def venv_bin(wheel, tmp_path_factory):
    return make_venv(tmp_path_factory.mktemp("venv") / "v", wheel)


def run_in(bin_dir, code, extra_path=(), cwd=None):
    env = clean_env()
    env["PYTHONPATH"] = os.pathsep.join(list(extra_path) + [env["PYTHONPATH"]])
    env["PATH"] = bin_dir + os.pathsep + env["PATH"]
    return subprocess.run([os.path.join(bin_dir, "python"), "-c", code], env=env,
                          capture_output=True, text=True, timeout=120, cwd=cwd)


def test_wheel_holds_only_the_start_up_hook_and_horovodrun(wheel):
    members = wheel_members(wheel)
    assert os.path.basename(wheel) == "tf_hvd_horovod-0.1.0-py3-none-any.whl"
    assert members["tf_hvd_horovod_names.pth"].strip() == "import _tf_hvd_horovod_names"
    assert "_tf_hvd_horovod_names.py" in members
    assert not [m for m in members if m.startswith("horovod/")]  # no files over Horovod's
    info = "tf_hvd_horovod-0.1.0.dist-info/"
    assert re.search(r"^Requires-Dist: tf[-_]hvd==0\.1\.0$", members[info + "METADATA"],
                     re.M), members[info + "METADATA"]
    assert "horovodrun = tf_hvd.runner.horovodrun:main" in members[info + "entry_points.txt"]


def test_horovod_module_paths_are_the_tf_hvd_modules(venv_bin):
    code = r"""
import importlib, json, sys
import horovod
from tf_hvd.horovod_names import ALIASES
same = []
for alias, target in sorted(ALIASES.items()):
    mod = importlib.import_module(alias)
    same.append(mod is importlib.import_module(target) and mod.__name__ == target
                and mod.__spec__.name == target and sys.modules[alias] is mod)
import horovod.tensorflow as hvd, horovod.tensorflow.keras as hk
from horovod.tensorflow.mpi_ops import Sum, _allreduce
from horovod.common.exceptions import HorovodInternalError
import tf_hvd, tf_hvd.mpi_ops, tf_hvd.exceptions, tf_hvd.runner
print(json.dumps({
    "same": same, "version": horovod.__version__,
    "run": horovod.run is tf_hvd.runner.run,
    "attrs": [hvd.mpi_ops is tf_hvd.mpi_ops, hk.callbacks is tf_hvd.keras.callbacks,
              Sum is tf_hvd.mpi_ops.Sum, _allreduce is tf_hvd.mpi_ops._allreduce,
              HorovodInternalError is tf_hvd.exceptions.HorovodInternalError],
    "tensorflow_loaded": "tensorflow" in sys.modules}))
"""
    res = run_in(venv_bin, code)
    assert res.returncode == 0, res.stderr[-4000:]
    import json
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert len(out["same"]) == len(horovod_names.ALIASES) and all(out["same"]), out
    assert out["version"] == "0.28.1" and out["run"] and all(out["attrs"]), out


@pytest.mark.parametrize("module, words", [
    ("horovod.torch", "tf_hvd is for TensorFlow only; horovod.torch has no tf_hvd "
                      "counterpart"),
    ("horovod.tensorflow.util", "horovod.tensorflow.util is not one of Horovod's public "
                                "modules that tf_hvd provides (horovod.common.elastic"),
])
def test_a_module_tf_hvd_lacks_is_named(venv_bin, module, words):
    res = run_in(venv_bin, "import %s" % module)
    assert res.returncode == 1
    assert "ModuleNotFoundError: No module named %r: %s" % (module, words) in res.stderr, \
        res.stderr[-3000:]


def test_a_real_horovod_wins_and_horovodrun_refuses(venv_bin, tmp_path):
    real = tmp_path / "site" / "horovod"
    real.mkdir(parents=True)
    (real / "__init__.py").write_text("REAL = True\n")
    res = run_in(venv_bin, "import horovod, horovod.__init__; print(horovod.REAL)",
                 extra_path=[str(real.parent)])
    assert res.returncode == 0 and res.stdout.strip() == "True", res.stderr[-3000:]
    env = clean_env()
    env["PYTHONPATH"] = str(real.parent) + os.pathsep + env["PYTHONPATH"]
    res = subprocess.run([os.path.join(venv_bin, "horovodrun"), "-np", "2", "true"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert ("horovodrun: a real Horovod is installed (%s) beside tf_hvd's Horovod names"
            % (real / "__init__.py")) in res.stderr, res.stderr
    assert "pip uninstall tf-hvd-horovod" in res.stderr


def test_not_installed_by_default_and_harmless_without_tf_hvd(wheel, tmp_path):
    # The test venv itself (tf_hvd without the extra) has no `horovod`.
    res = subprocess.run([sys.executable, "-c", "import horovod"], env=clean_env(),
                         capture_output=True, text=True, timeout=60, cwd=str(tmp_path))
    assert "No module named 'horovod'" in res.stderr, res.stderr[-2000:]
    # A venv with the wheel but no tf_hvd (uninstalled since): start-up is silent.
    bare = make_venv(tmp_path / "bare", wheel, stacked=False)
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root")}
    res = subprocess.run([os.path.join(bare, "python"), "-c", "print('started')"],
                         env=env, capture_output=True, text=True, timeout=60,
                         cwd=str(tmp_path))
    assert (res.returncode, res.stdout, res.stderr) == (0, "started\n", "")


def test_the_extra_pins_the_same_release():
    with open(os.path.join(REPO, "setup.py")) as f:
        text = f.read()
    assert 'horovod=["tf-hvd-horovod==%s" % VERSION]' in text
    assert horovod_names.HOROVOD_API_VERSION == "0.28.1"

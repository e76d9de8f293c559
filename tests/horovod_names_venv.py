"""A venv with the opt-in tf-hvd-horovod wheel installed by pip, as a user has it.

The wheel is built from horovod_names/ (as tools/release/build_wheels.sh builds it) and
installed with ``pip --python`` into a fresh venv stacked on the test venv (a .pth line
adds the test venv's site-packages, so TensorFlow is not installed twice). Its python
and its ``horovodrun`` are what a user of Horovod's import names runs.
"""

import os
import subprocess
import sys
import sysconfig
import zipfile

from jobrunner import REPO

SOURCE = os.path.join(REPO, "horovod_names")


def build_wheel(out_dir):
    """Path of the tf-hvd-horovod wheel built into ``out_dir``."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(out_dir), SOURCE],
                   check=True, capture_output=True, text=True, timeout=120)
    wheels = [f for f in os.listdir(out_dir) if f.startswith("tf_hvd_horovod-")]
    assert len(wheels) == 1, wheels
    return os.path.join(str(out_dir), wheels[0])


def make_venv(venv_dir, wheel, stacked=True):
    """A venv at ``venv_dir`` with ``wheel`` pip-installed (no dependencies); stacked on
    this interpreter's site-packages unless ``stacked`` is False. Returns its bin/."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv_dir)],
                   check=True, timeout=60)
    python = os.path.join(str(venv_dir), "bin", "python")
    if stacked:
        site_dir = subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True).stdout.strip()
        with open(os.path.join(site_dir, "_test_venv.pth"), "w") as f:
            f.write("import site; site.addsitedir(%r)\n" % sysconfig.get_paths()["purelib"])
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "-q",
                    "--no-deps", "--no-index", wheel],
                   check=True, capture_output=True, text=True, timeout=120)
    return os.path.join(str(venv_dir), "bin")


def wheel_members(wheel):
    with zipfile.ZipFile(wheel) as z:
        return {name: z.read(name).decode() for name in z.namelist()}

"""The opt-in ``tf-hvd-horovod`` distribution: Horovod's import names and ``horovodrun``
over tf_hvd (docs/horovod-names.md). It holds no code of its own beyond a start-up hook:
the names are tf_hvd.horovod_names, installed by one ``.pth`` line.

    pip wheel --no-deps -w dist horovod_names/      # tf_hvd_horovod-<version>-py3-none-any.whl
    pip install "tf_hvd[horovod]"                   # how users get it
"""

import os
import re

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PTH = "tf_hvd_horovod_names.pth"


def _tf_hvd_version():
    # The same release as tf_hvd (its local label, +tf2.21, is not part of the pin).
    with open(os.path.join(HERE, "..", "tf_hvd", "__init__.py")) as f:
        return re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)


class BuildWithPth(build_py):
    """Puts the .pth file at the top of the wheel's purelib, where `site` reads it
    (setuptools installs no .pth from package data)."""

    def run(self):
        super().run()
        self.copy_file(os.path.join(HERE, PTH), os.path.join(self.build_lib, PTH))


VERSION = _tf_hvd_version()

setup(
    name="tf-hvd-horovod",
    version=VERSION,
    description="Horovod's import names (horovod.tensorflow, ...) and horovodrun, for tf_hvd",
    python_requires=">=3.9",
    install_requires=["tf_hvd==%s" % VERSION],
    py_modules=["_tf_hvd_horovod_names"],
    cmdclass={"build_py": BuildWithPth},
    entry_points={"console_scripts": ["horovodrun = tf_hvd.runner.horovodrun:main"]},
    zip_safe=False,
)

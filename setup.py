"""pip-installable tf_hvd: `pip install .` builds tf_hvd/_hvd.so with Bazel (tools/build_lib.sh).

The library is built against the TensorFlow of the Python running pip (PYTHON_BIN_PATH
overrides) and records that version; importing it with another TensorFlow fails naming
both (tf_hvd/build_info.py). Extra Bazel flags: TF_HVD_BAZEL_FLAGS="--config=cuda" pip install .
The CUDA variant (NCCL for GPU tensors; needs `pip install -r tools/requirements-cuda.txt`
first, no GPU): TF_HVD_BAZEL_FLAGS=--config=cuda pip install .  (or TF_HVD_CUDA=1)

A wheel for other environments with the same TensorFlow (no network needed):
    pip wheel --no-build-isolation --no-deps -w dist .
"""
import os
import shlex
import subprocess
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class BazelBuildExt(build_ext):
    """Builds the single Bazel target //:_hvd.so instead of compiling with distutils."""

    def get_ext_filename(self, fullname):
        # tf_hvd._hvd -> tf_hvd/_hvd.so (the name the package loads; no ABI tag).
        return os.path.join(*fullname.split(".")) + ".so"

    def build_extension(self, ext):
        env = dict(os.environ)
        # Build against the TensorFlow of the Python running this. (Left unset for the
        # default venv, so the Bazel cache is shared with tools/build_lib.sh.)
        default_venv = env.get("TF_HVD_VENV") or os.path.expanduser("~/.venvs/tf_hvd")
        if not env.get("PYTHON_BIN_PATH") and (
                os.path.realpath(sys.prefix) != os.path.realpath(default_venv)):
            env["PYTHON_BIN_PATH"] = sys.executable
        flags = shlex.split(env.get("TF_HVD_BAZEL_FLAGS", ""))
        # Straight to where this build wants it: a wheel build leaves the source tree's
        # tf_hvd/_hvd.so (an editable install's library) alone.
        dest = os.path.abspath(self.get_ext_fullpath(ext.name))
        env["TF_HVD_LIB_DEST"] = dest
        subprocess.check_call([os.path.join(ROOT, "tools", "build_lib.sh")] + flags,
                              cwd=ROOT, env=env)


setup(
    name="tf_hvd",
    version="0.1.0",
    description="Horovod-style data-parallel training for TensorFlow 2.21 / Keras 3",
    python_requires=">=3.9",
    # tensorflow is the user's to choose (CPU or and-cuda); objects travel with cloudpickle.
    install_requires=["cloudpickle"],
    extras_require={"ray": ["ray[train]"]},
    packages=find_packages(where=ROOT, include=["tf_hvd", "tf_hvd.*"]),
    ext_modules=[Extension("tf_hvd._hvd", sources=[])],
    cmdclass={"build_ext": BazelBuildExt},
    entry_points={"console_scripts": ["tfhvdrun = tf_hvd.runner.launch:main"]},
    zip_safe=False,
)

"""pip-installable tf_hvd: `pip install .` builds tf_hvd/_hvd.so with Bazel
(tools/build/build_lib.sh).

The library is built against the TensorFlow of the Python running pip (PYTHON_BIN_PATH
overrides) and records that version; importing it with another TensorFlow fails naming
both (tf_hvd/build_info.py). The wheel says which TensorFlow minor it is for twice: in its
version's local label (0.1.0+tf2.21) and in its extras, which pin that minor for whichever
TensorFlow distribution the user has: tf_hvd[tensorflow], tf_hvd[tensorflow-cpu],
tf_hvd[and-cuda] (tensorflow[and-cuda]). A plain requirement on `tensorflow` would install a
second TensorFlow beside a user's tensorflow-cpu, so the pin lives in the extras.
Release wheels (every Python and TensorFlow, auditwheel-repaired): tools/release/build_wheels.sh. Extra Bazel flags: TF_HVD_BAZEL_FLAGS="--config=cuda" pip install .
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
        # default venv, so the Bazel cache is shared with tools/build/build_lib.sh.)
        default_venv = env.get("TF_HVD_VENV") or os.path.expanduser("~/.venvs/tf_hvd")
        if not env.get("PYTHON_BIN_PATH") and (
                os.path.realpath(sys.prefix) != os.path.realpath(default_venv)):
            env["PYTHON_BIN_PATH"] = sys.executable
        flags = shlex.split(env.get("TF_HVD_BAZEL_FLAGS", ""))
        # Straight to where this build wants it: a wheel build leaves the source tree's
        # tf_hvd/_hvd.so (an editable install's library) alone.
        dest = os.path.abspath(self.get_ext_fullpath(ext.name))
        env["TF_HVD_LIB_DEST"] = dest
        subprocess.check_call([os.path.join(ROOT, "tools", "build", "build_lib.sh")] + flags,
                              cwd=ROOT, env=env)
        # A release build (tools/release/build_wheel.sh) records the glibc its toolchain targets, so
        # that `import tf_hvd` on an older system says so instead of failing in the loader.
        floor = env.get("TF_HVD_GLIBC_FLOOR")
        if floor:
            with open(os.path.join(os.path.dirname(dest), "_floor.txt"), "w") as f:
                f.write("glibc %s\n" % floor)


VERSION = "0.1.0"


def _build_tensorflow():
    """(distribution, version) of the TensorFlow this build is against: the Python running
    setup.py, or PYTHON_BIN_PATH's when set (asked without importing TensorFlow)."""
    code = ("from importlib import metadata\n"
            "for d in ('tensorflow', 'tensorflow-cpu', 'tf-nightly', 'tf-nightly-cpu'):\n"
            "    try: print(d, metadata.version(d)); break\n"
            "    except metadata.PackageNotFoundError: pass\n")
    python = os.environ.get("PYTHON_BIN_PATH") or sys.executable
    out = subprocess.run([python, "-c", code], capture_output=True, text=True).stdout.split()
    return (out[0], out[1]) if len(out) == 2 else (None, None)


def _tensorflow_extras(dist, version):
    """The extras that pin this build's TensorFlow minor, and the version's local label."""
    if not version:
        return {}, ""
    major, minor = version.split(".")[:2]
    if dist.startswith("tf-nightly"):  # a nightly library fits that night's build only
        spec = "==" + version
        return {"tf-nightly": ["tf-nightly" + spec]}, "+tfnightly" + version.split("dev")[-1]
    floor = "%s.%s.0rc0" % (major, minor) if "rc" in version else "%s.%s.0" % (major, minor)
    spec = ">=%s,<%s.%d" % (floor, major, int(minor) + 1)
    return ({"tensorflow": ["tensorflow" + spec], "tensorflow-cpu": ["tensorflow-cpu" + spec],
             "and-cuda": ["tensorflow[and-cuda]" + spec]},
            "+tf%s.%s" % (major, minor))


TF_DIST, TF_VERSION = _build_tensorflow()
TF_EXTRAS, TF_LABEL = _tensorflow_extras(TF_DIST, TF_VERSION)

setup(
    name="tf_hvd",
    version=VERSION + TF_LABEL,
    description="Horovod-style data-parallel training for TensorFlow %s / Keras 3" % (
        ".".join((TF_VERSION or "2.21").split(".")[:2])),
    python_requires=">=3.9",
    # tensorflow is the user's to choose (CPU or and-cuda); objects travel with cloudpickle.
    install_requires=["cloudpickle"],
    # horovod: Horovod's import names and horovodrun (horovod_names/), never by default.
    extras_require=dict(TF_EXTRAS, ray=["ray[train]"],
                        horovod=["tf-hvd-horovod==%s" % VERSION]),
    packages=find_packages(where=ROOT, include=["tf_hvd", "tf_hvd.*"]),
    ext_modules=[Extension("tf_hvd._hvd", sources=[])],
    cmdclass={"build_ext": BazelBuildExt},
    entry_points={"console_scripts": ["tfhvdrun = tf_hvd.runner.launch:main"]},
    zip_safe=False,
)

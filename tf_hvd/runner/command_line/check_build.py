"""``tfhvdrun -cb`` / ``--check-build``: what this tf_hvd was built with, laid out as
horovodrun lays it out::

    tf_hvd v0.1.0:

    Available Frameworks:
        [X] TensorFlow
        [ ] PyTorch
        [ ] MXNet

    Available Controllers:
        [X] MPI
        [X] Gloo

    Available Tensor Operations:
        [ ] NCCL
        [ ] DDL
        [ ] CCL
        [X] MPI
        [X] Gloo

The facts come from the native library (``tf_hvd._hvd``: mpi_built, gloo_built,
nccl_built), which needs TensorFlow: if it cannot be loaded, TensorFlow is not
available and nothing is marked (``--verbose`` says why).
"""

import json
import os
import subprocess
import sys

from ... import __version__

# Run in a child Python: loading the library loads TensorFlow, which the launcher itself
# never imports (it starts at once), and its start-up chatter stays in the child.
_PROBE = """import json
from tf_hvd import basics as b
print(json.dumps(dict(mpi=b.mpi_built(), gloo=b.gloo_built(), nccl=b.nccl_built(),
                      ddl=b.ddl_built(), ccl=b.ccl_built())))
"""
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def built_features(verbose_log=None):
    """{name: bool} of what the library was built with."""
    features = {"tensorflow": False, "torch": False, "mxnet": False, "mpi": False,
                "gloo": False, "nccl": False, "ddl": False, "ccl": False}
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's start-up chatter
    env["PYTHONPATH"] = os.pathsep.join([_PACKAGE_ROOT] + [
        p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    try:
        res = subprocess.run([sys.executable, "-c", _PROBE], env=env, timeout=300,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        found = json.loads(res.stdout.decode().strip().splitlines()[-1]) \
            if res.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
        found, res = None, e
    if found is None:
        if verbose_log is not None:
            why = res.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] \
                if isinstance(res, subprocess.CompletedProcess) else [str(res)]
            verbose_log("the TensorFlow library could not be loaded: %s"
                        % (why[0] if why else "no message"))
        return features
    features.update(found, tensorflow=True)
    return features


def report(features, verbose=False):
    def mark(name):
        return "X" if features.get(name) else " "

    lines = ["tf_hvd v%s:" % __version__, "",
             "Available Frameworks:",
             "    [%s] TensorFlow" % mark("tensorflow"),
             "    [%s] PyTorch" % mark("torch"),
             "    [%s] MXNet" % mark("mxnet"), "",
             "Available Controllers:",
             "    [%s] MPI" % mark("mpi"),
             "    [%s] Gloo" % mark("gloo"), "",
             "Available Tensor Operations:",
             "    [%s] NCCL" % mark("nccl"),
             "    [%s] DDL" % mark("ddl"),
             "    [%s] CCL" % mark("ccl"),
             "    [%s] MPI" % mark("mpi"),
             "    [%s] Gloo" % mark("gloo")]
    return ("\n" if verbose else "") + "\n".join(lines) + "\n"

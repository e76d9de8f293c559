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

from .. import __version__


def built_features(verbose_log=None):
    """{name: bool} of what the library was built with."""
    features = {"tensorflow": False, "torch": False, "mxnet": False, "mpi": False,
                "gloo": False, "nccl": False, "ddl": False, "ccl": False}
    import os
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's start-up chatter
    try:
        from tf_hvd import basics
    except Exception as e:  # noqa: BLE001 - any import failure means "not available"
        if verbose_log is not None:
            verbose_log("the TensorFlow library could not be loaded: %s: %s"
                        % (type(e).__name__, e))
        return features
    features.update(tensorflow=True, mpi=basics.mpi_built(), gloo=basics.gloo_built(),
                    nccl=basics.nccl_built(), ddl=basics.ddl_built(), ccl=basics.ccl_built())
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

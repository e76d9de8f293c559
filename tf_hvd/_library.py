"""The native library, loaded once: the bottom layer of tf_hvd.

``tf_hvd/_hvd.so`` is one shared library that is both a TensorFlow op library
(HorovodAllreduce, HorovodAllgather, ...) and the pybind11 module
``tf_hvd._hvd``. Importing this module loads it: ``tf.load_op_library`` first
(so TensorFlow registers the ops and kernels), then the same file is imported
as a Python extension module. Both views share one global state in the process.

    from tf_hvd._library import lib, op_lib
    lib.is_initialized()          # the pybind11 module (init, size, ...)
    op_lib.horovod_rank()         # the generated TF op wrappers

Every other TensorFlow-backed module of tf_hvd sits above this one.
"""

import glob
import importlib
import os
import sys
from importlib import machinery, util

import tensorflow as tf
from tensorflow.python.framework import auto_control_deps

from tf_hvd import build_info, platform_floor
from tf_hvd.job import rank_env

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _find_library():
    """Returns the path of the built _hvd shared library."""
    override = os.environ.get(rank_env.LIBRARY)
    if override:
        if not os.path.isfile(override):
            raise ImportError("%s=%s does not name a file" % (rank_env.LIBRARY, override))
        return override
    candidates = [os.path.join(_PACKAGE_DIR, "_hvd.so")]
    candidates += sorted(glob.glob(os.path.join(_PACKAGE_DIR, "_hvd.*.so")))
    for path in candidates:
        if os.path.isfile(path):
            return path
    raise ImportError(
        "tf_hvd's native library was not found in %s (expected _hvd.so). "
        "Build it first: `bash tools/setup.sh` in a source tree, or "
        "`pip install .`." % _PACKAGE_DIR)


def _load():
    path = _find_library()
    # A release wheel forced onto a system older than its glibc floor, or a library built
    # for another TensorFlow, would fail inside the loader ("version `GLIBC_2.28' not
    # found", an undefined symbol); say which versions differ instead.
    platform_floor.check_library(path)
    build_info.check_library(path)
    try:
        ops = tf.load_op_library(path)
        if os.path.dirname(os.path.abspath(path)) == _PACKAGE_DIR:
            module = importlib.import_module("tf_hvd._hvd")
        else:
            # A library outside the package (TF_HVD_LIBRARY): import that file.
            loader = machinery.ExtensionFileLoader("tf_hvd._hvd", path)
            spec = util.spec_from_file_location("tf_hvd._hvd", path, loader=loader)
            module = util.module_from_spec(spec)
            loader.exec_module(module)
    except Exception as e:  # tf.errors.NotFoundError, ImportError or OSError from dlopen
        explained = platform_floor.explain_load_error(path, e)
        if explained is None:
            raise
        raise explained from e
    return ops, module


# op_lib: the generated TF op wrappers (horovod_allreduce, ...);
# lib: the pybind11 module (init, size, ...).
op_lib, lib = _load()

# MPI is loaded at run time, not linked (cc/common/mpi/mpi_library.h): besides
# HOROVOD_MPI_LIBRARY and the loader's path, the core looks where a pip-installed
# MPI (the mpich or impi-rt wheel) puts libmpi.so.12 in this environment.
lib._set_mpi_search_dirs(sorted({os.path.join(p, "lib") for p in (sys.prefix, sys.base_prefix)},
                                key=lambda d: d != os.path.join(sys.prefix, "lib")))
# Likewise the CUDA variant's CUDA runtime and NCCL, at the first GPU tensor: where the
# nvidia-* wheels of `tensorflow[and-cuda]` put them.
lib._set_gpu_search_dirs([
    os.path.join(site, "nvidia", package, "lib")
    for site in sys.path if site and os.path.isdir(os.path.join(site, "nvidia"))
    for package in ("cuda_runtime", "nccl", "cu13")])

# The collective ops are stateful, so that TensorFlow never constant-folds
# them (their result depends on the other ranks). Inside tf.function,
# TensorFlow would then chain every stateful op in program order, which
# serialises the allreduces of a backward pass and defeats tensor fusion;
# the core orders collectives itself (by name, across ranks), so they are
# registered as "must run, order insensitive", as TensorFlow does for its own
# infeed ops.
_COLLECTIVE_OP_TYPES = frozenset((
    "HorovodAllreduce", "HorovodGroupedAllreduce", "HorovodAllgather", "HorovodBroadcast",
    "HorovodAlltoall", "HorovodReducescatter"))


def _register_order_insensitive_ops():
    name = "MUST_RUN_ORDER_INSENSITIVE_STATEFUL_OPS"
    current = getattr(auto_control_deps, name, None)
    if current is not None and not _COLLECTIVE_OP_TYPES <= current:
        setattr(auto_control_deps, name, frozenset(current) | _COLLECTIVE_OP_TYPES)


_register_order_insensitive_ops()

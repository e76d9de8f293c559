"""The CUDA variant builds here (no GPU, no system CUDA; NCCL and the CUDA runtime from the
PyPI wheels of tools/requirements-cuda.txt, which tools/setup.sh installs), and a package
holding it imports, says cuda_built() and nccl_built(), registers GPU kernels for every
collective, and still runs CPU collectives at np=2.

The CUDA library (//:_hvd_cuda.so) is built into a temporary copy of the package, never
over tf_hvd/_hvd.so (the CPU library the rest of the suite imports). It shares every object
file but the GPU code with the CPU library (the layer libraries of cc/), so with Bazel's cache
warm from the CPU build this is the GPU files (once) and a link.

The TF-free GPU test program (tests/gpu/, the one command for a lent GPU machine) is built
from the same libraries (//tests/gpu:core_gpu_test: one more source file and a link); it
cannot run here (no GPU). Its Bazel-free fallback, tests/gpu/build.sh, must compile the same
core sources as that target.

    PYTHONPATH=. python -m pytest -q tests/unit/test_cuda_build.py
"""
import os
import shutil
import subprocess
import sys

import pytest

from jobrunner import PYTHON, REPO, base_env, run, tfhvdrun_cmd

# Bazel runs one command at a time per workspace: the tests that call it share one
# pytest-xdist worker (tools/run_tests.sh runs tests/unit with --dist loadgroup); the
# fallback script's build (g++ alone) runs beside them.
BAZEL = pytest.mark.xdist_group("bazel")

REQUIREMENTS = os.path.join(REPO, "tools", "requirements-cuda.txt")

# Runs on every rank of the job, importing the CUDA package.
WORKER = r"""
import numpy as np
import tensorflow as tf
import tf_hvd as hvd
from tensorflow.python.framework import kernels

assert hvd.__file__.startswith(PACKAGE_ROOT), hvd.__file__
assert hvd.cuda_built() and hvd.nccl_built(), (hvd.cuda_built(), hvd.nccl_built())
# The CUDA runtime and NCCL are loaded at run time from the nvidia-* wheels (no GPU needed
# to load them; the first GPU tensor would do it).
from tf_hvd._library import lib
assert lib._gpu_libraries() == "", lib._gpu_libraries()
with open("/proc/self/maps") as f:
    maps = f.read()
assert "nvidia/nccl/lib/libnccl.so.2" in maps and "libcudart.so.12" in maps, maps[-2000:]
for op in ["HorovodAllreduce", "HorovodGroupedAllreduce", "HorovodAllgather", "HorovodBroadcast",
           "HorovodAlltoall", "HorovodReducescatter", "HorovodJoin", "HorovodBarrier"]:
    devices = {k.device_type for k in kernels.get_registered_kernels_for_op(op).kernel}
    assert devices >= {"CPU", "GPU"}, (op, devices)
hvd.init()
r, n = hvd.rank(), hvd.size()
assert n == 2
x = tf.constant([1.0, 2.0, 3.0]) * (r + 1)
np.testing.assert_array_equal(hvd.allreduce(x, op=hvd.Sum).numpy(), [3.0, 6.0, 9.0])
np.testing.assert_array_equal(hvd.allreduce(x).numpy(), [1.5, 3.0, 4.5])
g = hvd.allgather(tf.fill([r + 1, 2], r))
np.testing.assert_array_equal(g.numpy(), [[0, 0], [1, 1], [1, 1]])
b = hvd.broadcast(tf.constant([r, r]), root_rank=1)
np.testing.assert_array_equal(b.numpy(), [1, 1])
print("CUDA-BUILD-OK rank", r, flush=True)
hvd.shutdown()
"""


def _wheels_installed():
    code = ("import importlib\n"
            "for m in ['nvidia.nccl', 'nvidia.cuda_runtime', 'nvidia.cuda_nvcc', "
            "'nvidia.cuda_nvrtc']:\n"
            "    importlib.import_module(m)\n")
    return subprocess.run([PYTHON, "-c", code], capture_output=True).returncode == 0


@BAZEL
def test_cuda_variant_builds_imports_and_runs_cpu_collectives(tmp_path):
    assert _wheels_installed(), (
        "the CUDA wheels are missing: pip install -r tools/requirements-cuda.txt "
        "(tools/setup.sh does it)")
    package = tmp_path / "pkg"
    shutil.copytree(os.path.join(REPO, "tf_hvd"), package / "tf_hvd",
                    ignore=shutil.ignore_patterns("_hvd.so", "__pycache__", "*.tmp.*"))
    library = package / "tf_hvd" / "_hvd.so"
    env = dict(os.environ, TF_HVD_LIB_DEST=str(library))
    build = run(["bash", os.path.join(REPO, "tools", "build", "build_lib.sh"), "--cuda"],
                timeout=1500, env=env, cwd=REPO)
    assert build.ok, build.describe(text=build.output[-6000:])
    assert library.exists()

    # NCCL and the CUDA runtime are loaded at run time (the worker checks that they are
    # found without LD_LIBRARY_PATH), never linked: one library for CPU and GPU machines.
    checked = run([PYTHON, os.path.join(REPO, "tools", "release", "check_wheels.py"), "--library",
                   str(library)], timeout=120)
    assert checked.ok, checked.describe()

    worker = tmp_path / "worker.py"
    worker.write_text("PACKAGE_ROOT = %r\n" % str(package) + WORKER)
    job_env = base_env({"PYTHONPATH": os.pathsep.join([str(package), REPO])})
    res = run(tfhvdrun_cmd(2) + [sys.executable, str(worker)], timeout=240, env=job_env,
              cwd=str(tmp_path))
    assert res.ok, res.describe(text=res.output[-6000:])
    assert res.output.count("CUDA-BUILD-OK") == 2, res.output[-3000:]


def _bazel(args, timeout):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONHOME", "PYTHONSAFEPATH")}
    return run([os.path.join(REPO, "tools", "bazel")] + args, timeout=timeout, env=env, cwd=REPO)


@BAZEL
def test_the_tf_free_gpu_test_builds_from_the_cores_libraries():
    assert _wheels_installed(), "the CUDA wheels are missing (tools/setup.sh installs them)"
    build = _bazel(["build", "//tests/gpu:core_gpu_test"], 1500)
    assert build.ok, build.describe(text=build.output[-6000:])
    binary = os.path.join(REPO, "bazel-bin", "tests", "gpu", "core_gpu_test")
    assert os.access(binary, os.X_OK), binary
    ldd = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    for lib in ("libnccl.so.2", "libcudart.so.12"):
        line = [l for l in ldd.splitlines() if lib in l]
        assert line and "not found" not in line[0], ldd
    for absent in ("libtensorflow", "libmpi", "libpython"):
        assert absent not in ldd, ldd

    # The fallback script compiles exactly the core sources the Bazel target links.
    query = _bazel(["query", 'filter("^//cc/common[:/].*\\.cc$", kind("source file", '
                             'deps(//tests/gpu:core_gpu_test)))'], 600)
    assert query.ok, query.describe(40)
    bazel_sources = sorted(label[2:].replace(":", "/") for label in query.output.split()
                           if label.startswith("//cc/common"))
    listed = subprocess.run(["bash", os.path.join(REPO, "tests", "gpu", "build.sh"),
                             "--list-sources"], capture_output=True, text=True, check=True)
    assert listed.stdout.split() == bazel_sources
    assert "cc/common/autotune/parameter_manager.cc" in bazel_sources


@BAZEL
def test_nvrtc_compiles_the_batched_copy_kernel_without_a_gpu():
    """The fusion buffer's batched-copy kernel (cc/common/gpu/batched_copy.h) is compiled at
    run time by NVRTC; the core finds libnvrtc.so.12 beside the wheel's libcudart (no
    LD_LIBRARY_PATH) and turns the source into PTX here, where no GPU is. On a GPU the `nccl`
    scenario loads and runs it (tests/gpu/README.md)."""
    assert _wheels_installed(), "the CUDA wheels are missing (tools/setup.sh installs them)"
    build = _bazel(["build", "//tests/gpu:core_gpu_test"], 1500)
    assert build.ok, build.describe(text=build.output[-6000:])
    binary = os.path.join(REPO, "bazel-bin", "tests", "gpu", "core_gpu_test")
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    res = subprocess.run([binary, "compile"], capture_output=True, text=True, timeout=120,
                         env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "cuda_nvrtc/lib/libnvrtc.so.12" in res.stdout, res.stdout
    assert ".target sm_" in res.stdout, res.stdout


def test_the_fallback_script_builds_the_np2_variant_with_mpi(tmp_path):
    """`MPI=1 tests/gpu/build.sh` (the `mpiexec -n 2 core_gpu_test_mpi np2` program that ran
    host staging at np=2 on an H100) compiles the MPI backend in and links the mpich wheel's
    libmpi; the default listing stays without it."""
    assert _wheels_installed(), "the CUDA wheels are missing (tools/setup.sh installs them)"
    script = os.path.join(REPO, "tests", "gpu", "build.sh")
    # -O0: what is checked is that it compiles and links (the GPU machine builds with -O2).
    env = dict(os.environ, MPI="1", OPT="-O0", OUT_DIR=str(tmp_path), PYTHON=sys.executable)
    listed = subprocess.run(["bash", script, "--list-sources"], capture_output=True, text=True,
                            check=True, env=env).stdout.split()
    assert "cc/common/mpi/mpi_transport.cc" in listed
    built = subprocess.run(["bash", script], capture_output=True, text=True, env=env,
                           timeout=900)
    assert built.returncode == 0, built.stderr[-4000:]
    binary = tmp_path / "core_gpu_test_mpi"
    ldd = subprocess.run(["ldd", str(binary)], capture_output=True, text=True).stdout
    for lib in ("libmpi.so", "libnccl.so.2", "libcudart.so.12"):
        line = [l for l in ldd.splitlines() if lib in l]
        assert line and "not found" not in line[0], ldd

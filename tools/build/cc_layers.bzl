"""Compiler flags shared by the BUILD files of cc/ and the root BUILD.

Each folder of cc/common is one Bazel package and one cc_library (a layer); its
`visibility` lists the layers allowed to depend on it and its `deps` the layers it may
use (docs/architecture.md draws both). Bazel then refuses a forbidden include twice over:
a header of a layer that is not among a library's (transitive) deps is an "undeclared
inclusion" error, and a BUILD file that adds such a dep anyway fails the visibility check.
TensorFlow's and pybind11's headers are not on the include path of any core library.
"""

TF_HVD_COPTS = [
    "-std=c++17",
    "-D_GLIBCXX_USE_CXX11_ABI=1",
    "-DEIGEN_MAX_ALIGN_BYTES=64",
    "-O3",
    "-fPIC",
    # TensorFlow's and pybind11's headers are noisy; our own warnings stay on.
    "-Wno-sign-compare",
    "-Wno-unused-function",
]

# The root package: the shared libraries and the C++ unit tests.
ROOT = "//:__pkg__"

# The probes that prove the layering (tests/unit/cc/layering/BUILD): they may use any
# layer except the backends, to show what the include check refuses.
PROBES = "//tests/unit/cc/layering:__pkg__"

# The GPU code (cc/common/gpu, cc/common/nccl, cc/tensorflow's GPU kernels) compiles
# against the CUDA runtime and NCCL headers of the PyPI wheels (tools/build/local_deps.bzl):
# headers as sources with private -isystem flags (not `includes`), so nothing of CUDA
# reaches other targets; libcudart/libnccl are loaded at run time, not linked.
CUDA_COPTS = TF_HVD_COPTS + [
    "-isystem",
    "external/local_cuda/runtime/include",
    "-isystem",
    "external/local_cuda/nvcc/include",
    "-isystem",
    "external/local_nccl/include",
]

CUDA_HEADERS = [
    "@local_cuda//:headers",
    "@local_nccl//:headers",
]

CUDA_DEFINES = [
    "HAVE_CUDA=1",
    "HAVE_NCCL=1",
]

# The CUDA runtime and NCCL are loaded at run time (cc/common/gpu/gpu_libraries.h), not
# linked: the GPU layers need their headers only.
CUDA_LINK = []

def tf_hvd_layer(name, deps, visibility, cuda = False, folder = ""):
    """One layer of the core: every .cc and .h of the folder as one library.

    deps: the layers (and external libraries) it may use; visibility: the packages allowed
    to use it. cuda: compiled against the CUDA/NCCL headers (the CUDA library only).
    folder: a subfolder of the package holding the sources ("gpu/"), if not the package's.
    alwayslink: every object goes into the shared library, registrations included.
    """
    native.cc_library(
        name = name,
        srcs = native.glob([folder + "*.cc"]) + (CUDA_HEADERS if cuda else []),
        hdrs = native.glob([folder + "*.h"]),
        copts = CUDA_COPTS if cuda else TF_HVD_COPTS,
        local_defines = CUDA_DEFINES if cuda else [],
        alwayslink = True,
        visibility = visibility,
        deps = deps + (CUDA_LINK if cuda else []),
    )

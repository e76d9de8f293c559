"""Repository rules that find tf_hvd's C++ dependencies on this machine (no downloads).

Everything is located through one Python interpreter:
  PYTHON_BIN_PATH (env)  -> else $TF_HVD_VENV/bin/python -> else $HOME/.venvs/tf_hvd/bin/python
                         -> else python3 on PATH.
  @local_tf       headers of tf.sysconfig.get_include(), links libtensorflow_framework.so.2
                  from tf.sysconfig.get_lib() (never _pywrap_tensorflow_internal); :tf_cc also
                  links libtensorflow_cc.so.2 (XlaOpRegistry, XlaOpKernel: the XLA kernels).
  @local_python   Python.h from sysconfig (extension modules do not link libpython).
  @local_pybind11 pybind11.get_include().
  @local_mpi      the `mpich` PyPI wheel: <prefix>/include/mpi.h (MPICH's ABI); libmpi.so.12 is
                  loaded at run time, not linked (:mpi_link links it, for C++ tests only).
  @local_gloo     Debian libgloo-dev: /usr/include/gloo, /usr/lib/libgloo.so (GLOO_INCLUDE_DIR /
                  GLOO_LIB_DIR override; a GLOO_LIB_DIR with only libgloo.a links it statically).
  @local_boost    Debian libboost-dev: the headers of /usr/include/boost (BOOST_INCLUDE_DIR
                  override), header-only: Boost.Beast + Boost.Asio are the rendezvous HTTP client
                  (cc/common/gloo/http_store.cc); no Boost library is linked.
  (OpenSSL is neither linked nor needed to build: cc/common/gloo/crypto_library.h loads the
  system's libcrypto.so.3 or libcrypto.so.1.1 at run time.)
  @local_nccl     nvidia-nccl-cu12 wheel (only used by --config=cuda); an empty stub if absent.
  @local_cuda     nvidia-cuda-runtime-cu12 wheel: cuda_runtime.h, libcudart.so.12 (only used by
                  --config=cuda); an empty stub if absent. No system CUDA toolkit is needed.
  @local_tf_version  tf.__version__ of that Python, as a header the library records.
  TF_HVD_TF_DIR (env)  another architecture's TensorFlow, which no Python here can import
                  (tools/release/build_wheel.sh --arch aarch64): an unpacked tensorflow/ folder of its
                  wheel (tools/release/floor/tensorflow.sh: include/, libtensorflow_framework.so.2,
                  libtensorflow_cc.so.2, tf_hvd_version.txt) replaces the Python's for
                  @local_tf and @local_tf_version. The rest still comes from PYTHON_BIN_PATH,
                  an x86_64 interpreter of the same CPython version and TensorFlow release:
                  Python.h/pyconfig.h, pybind11's headers, mpi.h and the CUDA/NCCL headers.
                  That is sound for aarch64: both are LP64 and little-endian, so pyconfig.h's
                  sizes (SIZEOF_LONG, SIZEOF_VOID_P, SIZEOF_SIZE_T...) and the layout of every
                  object in CPython's API and ABI are the same for one CPython version;
                  pyconfig.h's machine-specific lines (HAVE_GCC_ASM_FOR_X87/X64, ...) are read
                  only by CPython's own sources. pybind11 is headers only; mpi.h and the CUDA
                  runtime's and NCCL's headers declare the same C API on both (their libraries
                  are loaded at run time, never linked).
  @local_gtest    Debian libgtest-dev: /usr/include/gtest, libgtest.a + libgtest_main.a
                  (GTEST_INCLUDE_DIR / GTEST_LIB_DIR override); used by the C++ cc_test targets.
"""

# Only these re-trigger the repository rules (TF_HVD_VENV/HOME, used for the default python,
# are left out on purpose: a changed marker means re-globbing ~18k TF headers, ~20 s).
# After upgrading TensorFlow in the same venv run `bazel sync --configure` (or `bazel clean --expunge`).
_ENV = [
    "PYTHON_BIN_PATH",
    "GLOO_INCLUDE_DIR",
    "GLOO_LIB_DIR",
    "BOOST_INCLUDE_DIR",
    "TF_HVD_TF_DIR",
]

def _fail(msg):
    fail("\n\ntf_hvd configure: %s\n" % msg)

def _python_bin(ctx):
    p = ctx.os.environ.get("PYTHON_BIN_PATH", "")
    if p:
        return p
    venv = ctx.os.environ.get("TF_HVD_VENV", "")
    if not venv:
        venv = ctx.os.environ.get("HOME", "/root") + "/.venvs/tf_hvd"
    cand = ctx.path(venv + "/bin/python")
    if cand.exists:
        return str(cand)
    w = ctx.which("python3")
    if w == None:
        _fail("no Python found: set PYTHON_BIN_PATH to the python that has tensorflow installed")
    return str(w)

def _py(ctx, code):
    py = _python_bin(ctx)
    r = ctx.execute([py, "-c", code], environment = {"TF_CPP_MIN_LOG_LEVEL": "3"}, quiet = True)
    if r.return_code != 0:
        _fail("`%s -c %r` failed:\n%s" % (py, code, r.stderr))
    return r.stdout.strip().splitlines()[-1].strip()

def _need(ctx, path, what):
    if not ctx.path(path).exists:
        _fail("%s not found at %s" % (what, path))

# TensorFlow -----------------------------------------------------------------------------

def _tf_dir(ctx):
    """TF_HVD_TF_DIR (another architecture's unpacked TensorFlow), or "" to ask the Python."""
    tf_dir = ctx.os.environ.get("TF_HVD_TF_DIR", "")
    if tf_dir:
        _need(ctx, tf_dir + "/tf_hvd_version.txt",
              "TF_HVD_TF_DIR's version (tools/release/floor/tensorflow.sh)")
    return tf_dir

def _tf_impl(ctx):
    tf_dir = _tf_dir(ctx)
    if tf_dir:
        inc, lib = tf_dir + "/include", tf_dir
    else:
        inc, lib = _py(ctx, "import tensorflow as tf; print(tf.sysconfig.get_include() + '|' + tf.sysconfig.get_lib())").split("|")
    _need(ctx, inc + "/tensorflow/core/framework/op_kernel.h", "TensorFlow headers")
    _need(ctx, lib + "/libtensorflow_framework.so.2", "libtensorflow_framework.so.2")
    _need(ctx, lib + "/libtensorflow_cc.so.2", "libtensorflow_cc.so.2")
    ctx.symlink(inc, "include")
    ctx.file("BUILD", """# Generated by tools/build/local_deps.bzl from {py}
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "tf",
    hdrs = glob(["include/**"], exclude = ["include/**/*.py", "include/**/__pycache__/**"]),
    includes = ["include"],
    linkopts = [
        "-L{lib}",
        # The C++ runtime first: TensorFlow 2.22's libtensorflow_framework.so.2 exports some
        # std::string members under its own version node ("tensorflow"), and a symbol binds to
        # the first library that defines it; tensorflow-cpu's library does not export them.
        "-lstdc++",
        "-l:libtensorflow_framework.so.2",
        # Installed next to tensorflow/ in site-packages, or loaded in the build venv.
        "-Wl,-rpath,$$ORIGIN/../tensorflow",
        "-Wl,-rpath,{lib}",
    ],
)

# The tf2xla op registry and XlaOpKernel live in libtensorflow_cc.so.2 (which `import
# tensorflow` loads anyway); the XLA builder and FFI in libtensorflow_framework.so.2.
cc_library(
    name = "tf_cc",
    # XLA's headers include highwayhash and farmhash from their own roots.
    includes = [
        "include/external/farmhash_archive/src",
        "include/external/highwayhash",
    ],
    linkopts = [
        "-L{lib}",
        "-l:libtensorflow_cc.so.2",
    ],
    deps = [":tf"],
)
""".format(lib = lib, py = tf_dir or _python_bin(ctx)))

local_tf = repository_rule(implementation = _tf_impl, environ = _ENV, configure = True)

# Python + pybind11 ----------------------------------------------------------------------

def _python_impl(ctx):
    inc = _py(ctx, "import sysconfig; print(sysconfig.get_paths()['include'])")
    _need(ctx, inc + "/Python.h", "Python.h")
    ctx.symlink(inc, "include")
    ctx.file("BUILD", """# Generated by tools/build/local_deps.bzl from {py}
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "python_headers",
    hdrs = glob(["include/**/*.h"]),
    includes = ["include"],
)
""".format(py = _python_bin(ctx)))

local_python = repository_rule(implementation = _python_impl, environ = _ENV, configure = True)

def _pybind11_impl(ctx):
    inc = _py(ctx, "import pybind11; print(pybind11.get_include())")
    _need(ctx, inc + "/pybind11/pybind11.h", "pybind11 headers (pip install pybind11)")
    ctx.symlink(inc, "include")
    ctx.file("BUILD", """# Generated by tools/build/local_deps.bzl from {py}
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "pybind11",
    hdrs = glob(["include/**/*.h"]),
    includes = ["include"],
    deps = ["@local_python//:python_headers"],
)
""".format(py = _python_bin(ctx)))

local_pybind11 = repository_rule(implementation = _pybind11_impl, environ = _ENV, configure = True)

# MPI (mpich wheel) ----------------------------------------------------------------------

def _mpi_impl(ctx):
    prefix = _py(ctx, "import sys; print(sys.prefix)")
    inc = prefix + "/include"
    lib = prefix + "/lib"
    _need(ctx, inc + "/mpi.h", "mpi.h (pip install mpich into the venv)")
    _need(ctx, lib + "/libmpi.so.12", "libmpi.so.12 (pip install mpich into the venv)")
    for h in ["mpi.h", "mpi_proto.h", "mpi_abi.h"]:
        if ctx.path(inc + "/" + h).exists:
            ctx.symlink(inc + "/" + h, "include/" + h)
    ctx.file("BUILD", """# Generated by tools/build/local_deps.bzl from {py}
package(default_visibility = ["//visibility:public"])

# Headers only: _hvd.so loads an MPICH-ABI libmpi at run time (cc/common/mpi/mpi_library.h),
# so that it runs with no MPI on the machine and with the site's MPI where there is one.
cc_library(
    name = "mpi",
    hdrs = glob(["include/*.h"]),
    includes = ["include"],
)

# Linked, for C++ tests that call MPI themselves (MPI_Init, MPI_Barrier).
cc_library(
    name = "mpi_link",
    linkopts = [
        "-L{lib}",
        "-l:libmpi.so.12",
        "-Wl,-rpath,{lib}",
    ],
    deps = [":mpi"],
)
""".format(lib = lib, py = _python_bin(ctx)))

local_mpi = repository_rule(implementation = _mpi_impl, environ = _ENV, configure = True)

# Gloo (Debian libgloo-dev) --------------------------------------------------------------

def _gloo_impl(ctx):
    inc = ctx.os.environ.get("GLOO_INCLUDE_DIR", "/usr/include")
    lib = ctx.os.environ.get("GLOO_LIB_DIR", "/usr/lib")
    _need(ctx, inc + "/gloo/config.h", "Gloo headers (apt-get install libgloo-dev)")
    ctx.symlink(inc + "/gloo", "include/gloo")
    if ctx.path(lib + "/libgloo.so").exists:
        linkopts = ["-L" + lib, "-lgloo", "-lpthread"]
        if lib not in ["/usr/lib", "/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib64"]:
            linkopts.append("-Wl,-rpath," + lib)
    else:
        # A static Gloo (the release wheels build one for their glibc floor: tools/release/floor/):
        # linked into _hvd.so, its symbols kept out of the dynamic table.
        _need(ctx, lib + "/libgloo.a", "libgloo.so or libgloo.a (apt-get install libgloo-dev)")
        linkopts = [lib + "/libgloo.a", "-Wl,--exclude-libs,libgloo.a", "-lpthread"]
    ctx.file("BUILD", """# Generated by tools/build/local_deps.bzl
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "gloo",
    hdrs = glob(["include/gloo/**/*.h"]),
    includes = ["include"],
    linkopts = {linkopts},
)
""".format(linkopts = repr(linkopts)))

local_gloo = repository_rule(implementation = _gloo_impl, environ = _ENV, configure = True)

# Boost (Debian libboost-dev), headers only --------------------------------------------

def _boost_impl(ctx):
    inc = ctx.os.environ.get("BOOST_INCLUDE_DIR", "/usr/include")
    _need(ctx, inc + "/boost/beast.hpp", "Boost.Beast headers (apt-get install libboost-dev, " +
                                         "Boost 1.70 or later; or set BOOST_INCLUDE_DIR)")
    _need(ctx, inc + "/boost/asio.hpp", "Boost.Asio headers (apt-get install libboost-dev)")
    ctx.symlink(inc + "/boost", "include/boost")
    ctx.file("BUILD", """# Generated by tools/build/local_deps.bzl from {inc}/boost
package(default_visibility = ["//visibility:public"])

# Header-only use (Boost.Beast, Boost.Asio and what they include): nothing is linked, so
# _hvd.so needs no Boost library at run time.
cc_library(
    name = "boost",
    hdrs = glob(["include/boost/**"]),
    includes = ["include"],
)
""".format(inc = inc))

local_boost = repository_rule(implementation = _boost_impl, environ = _ENV, configure = True)

# NCCL + CUDA runtime (only for --config=cuda) -------------------------------------------
# Both come from PyPI wheels in the same Python's site-packages (tools/requirements-cuda.txt):
#   nvidia-nccl-cu12          nvidia/nccl/{include/nccl.h, lib/libnccl.so.2}
#   nvidia-cuda-runtime-cu12  nvidia/cuda_runtime/{include/cuda_runtime.h, lib/libcudart.so.12}
# The library finds them at run time next to itself (site-packages/tf_hvd -> ../nvidia/...,
# where `tensorflow[and-cuda]` installs the same wheels) or at the build machine's paths.

_STUB = """# Generated by tools/build/local_deps.bzl: {what} was NOT found on this machine.
# --config=cuda fails at compile time with a missing-header error; run
# `pip install -r tools/requirements-cuda.txt` (or tools/setup.sh --cuda).
package(default_visibility = ["//visibility:public"])

filegroup(name = "headers")

cc_library(name = "link")
"""

def _nvidia_dir(ctx, package):
    """site-packages/nvidia/<package> of the build Python, or "" when that wheel is absent."""
    code = "import importlib, os; m = importlib.import_module('nvidia.%s'); print(list(m.__path__)[0])" % package
    r = ctx.execute([_python_bin(ctx), "-c", code], quiet = True)
    return r.stdout.strip().splitlines()[-1] if r.return_code == 0 and r.stdout.strip() else ""

def _wheel_library(ctx, name, package, header, lib, what):
    root = _nvidia_dir(ctx, package)
    if not root or not ctx.path(root + "/include/" + header).exists or not ctx.path(root + "/lib/" + lib).exists:
        ctx.file("BUILD", _STUB.format(what = what, name = name))
        return
    ctx.symlink(root + "/include", "include")
    ctx.file("BUILD", """# Generated by tools/build/local_deps.bzl from {root}
package(default_visibility = ["//visibility:public"])

# The headers as files (the GPU layers add -isystem external/local_{name}/include themselves
# (tools/build/cc_layers.bzl, CUDA_COPTS),
# so that no other target's compile command changes).
filegroup(
    name = "headers",
    srcs = glob(["include/**/*.h", "include/**/*.hpp"]),
)

cc_library(
    name = "link",
    linkopts = [
        "-L{root}/lib",
        "-l:{lib}",
        "-Wl,-rpath,{root}/lib",
        # Installed: site-packages/tf_hvd/_hvd.so -> site-packages/nvidia/{package}/lib.
        "-Wl,-rpath,$$ORIGIN/../nvidia/{package}/lib",
    ],
)
""".format(root = root, name = name, lib = lib, package = package))

def _nccl_impl(ctx):
    _wheel_library(ctx, "nccl", "nccl", "nccl.h", "libnccl.so.2",
                   "nccl (pip install -r tools/requirements-cuda.txt: nvidia-nccl-cu12)")

local_nccl = repository_rule(implementation = _nccl_impl, environ = _ENV, configure = True)

def _cuda_impl(ctx):
    # cuda_runtime.h includes crt/*.h (nvidia-cuda-nvcc-cu12's include/): two include dirs,
    # one repository. (CCCL's nv/target is kept out: cc/common/nccl/nccl_header.h.)
    runtime = _nvidia_dir(ctx, "cuda_runtime")
    nvcc = _nvidia_dir(ctx, "cuda_nvcc")
    what = "the CUDA runtime headers (pip install -r tools/requirements-cuda.txt: " + \
           "nvidia-cuda-runtime-cu12, nvidia-cuda-nvcc-cu12)"
    if (not runtime or not nvcc or
        not ctx.path(runtime + "/include/cuda_runtime.h").exists or
        not ctx.path(runtime + "/lib/libcudart.so.12").exists or
        not ctx.path(nvcc + "/include/crt/host_config.h").exists):
        ctx.file("BUILD", _STUB.format(what = what))
        return
    ctx.symlink(runtime + "/include", "runtime/include")
    ctx.symlink(nvcc + "/include/crt", "nvcc/include/crt")
    ctx.file("BUILD", """# Generated by tools/build/local_deps.bzl from {runtime}, {nvcc}
package(default_visibility = ["//visibility:public"])

# The GPU layers (tools/build/cc_layers.bzl, CUDA_COPTS) add -isystem
# external/local_cuda/{{runtime,nvcc}}/include themselves,
# so that no other target's compile command changes.
filegroup(
    name = "headers",
    srcs = glob([
        "runtime/include/**/*.h",
        "runtime/include/**/*.hpp",
        "nvcc/include/crt/**/*.h",
        "nvcc/include/crt/**/*.hpp",
    ]),
)

cc_library(
    name = "link",
    linkopts = [
        "-L{runtime}/lib",
        "-l:libcudart.so.12",
        "-Wl,-rpath,{runtime}/lib",
        # Installed: site-packages/tf_hvd/_hvd.so -> site-packages/nvidia/cuda_runtime/lib.
        "-Wl,-rpath,$$ORIGIN/../nvidia/cuda_runtime/lib",
    ],
)
""".format(runtime = runtime, nvcc = nvcc))

local_cuda = repository_rule(implementation = _cuda_impl, environ = _ENV, configure = True)

def tf_hvd_dependencies():
    local_tf(name = "local_tf")
    local_python(name = "local_python")
    local_pybind11(name = "local_pybind11")
    local_mpi(name = "local_mpi")
    local_gloo(name = "local_gloo")
    local_boost(name = "local_boost")
    local_nccl(name = "local_nccl")
    local_cuda(name = "local_cuda")

# The TensorFlow version the library is built against -------------------------------------
# TensorFlow's headers do not carry its version (release_version.h expects -D flags from
# TensorFlow's own build), so it is asked from the same Python as @local_tf and written
# into a header; cc/tensorflow/build_info.cc stores it in the library, and
# tf_hvd/build_info.py compares it with the imported TensorFlow before loading.

def _tf_version_impl(ctx):
    tf_dir = _tf_dir(ctx)
    if tf_dir:
        version = ctx.read(tf_dir + "/tf_hvd_version.txt").strip()
    else:
        version = _py(ctx, "import tensorflow as tf; print(tf.__version__ + '|' + tf.version.GIT_VERSION)")
    tf_version, git_version = version.split("|")
    ctx.file("tf_hvd_tf_version.h", """// Generated by tools/build/local_deps.bzl from {py}
#pragma once
#define TF_HVD_BUILT_TF_VERSION "{version}"
#define TF_HVD_BUILT_TF_GIT_VERSION "{git}"
""".format(py = tf_dir or _python_bin(ctx), version = tf_version, git = git_version))
    ctx.file("BUILD", """# Generated by tools/build/local_deps.bzl
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "tf_version",
    hdrs = ["tf_hvd_tf_version.h"],
    includes = ["."],
)
""")

local_tf_version = repository_rule(implementation = _tf_version_impl, environ = _ENV, configure = True)

def tf_hvd_build_info_dependencies():
    """The TensorFlow version header (kept apart from tf_hvd_dependencies)."""
    local_tf_version(name = "local_tf_version")

# GoogleTest (Debian libgtest-dev; C++ unit tests only) -----------------------------------

_GTEST_ENV = ["GTEST_INCLUDE_DIR", "GTEST_LIB_DIR"]

def _gtest_impl(ctx):
    inc = ctx.os.environ.get("GTEST_INCLUDE_DIR", "/usr/include")
    lib = ctx.os.environ.get("GTEST_LIB_DIR", "")
    if not lib:
        # Debian puts the static libraries in the multiarch dir; older packages in /usr/lib.
        lib = "/usr/lib/x86_64-linux-gnu"
        for cand in ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib"]:
            if ctx.path(cand + "/libgtest.a").exists:
                lib = cand
                break
    _need(ctx, inc + "/gtest/gtest.h", "GoogleTest headers (apt-get install libgtest-dev)")
    _need(ctx, lib + "/libgtest.a", "libgtest.a (apt-get install libgtest-dev)")
    _need(ctx, lib + "/libgtest_main.a", "libgtest_main.a (apt-get install libgtest-dev)")
    ctx.symlink(inc + "/gtest", "include/gtest")
    ctx.symlink(lib + "/libgtest.a", "lib/libgtest.a")
    ctx.symlink(lib + "/libgtest_main.a", "lib/libgtest_main.a")
    ctx.file("BUILD", """# Generated by tools/build/local_deps.bzl from {lib}
package(default_visibility = ["//visibility:public"])

cc_import(
    name = "gtest_lib",
    static_library = "lib/libgtest.a",
)

cc_library(
    name = "gtest",
    hdrs = glob(["include/gtest/**/*.h"]),
    includes = ["include"],
    linkopts = ["-pthread"],
    deps = [":gtest_lib"],
)

# gtest plus a main() that runs every TEST (its archive is linked before libgtest.a).
cc_library(
    name = "gtest_main",
    srcs = ["lib/libgtest_main.a"],
    deps = [":gtest"],
)
""".format(lib = lib))

local_gtest = repository_rule(implementation = _gtest_impl, environ = _GTEST_ENV, configure = True)

def tf_hvd_test_dependencies():
    """Repositories only the tests need (kept apart from tf_hvd_dependencies)."""
    local_gtest(name = "local_gtest")

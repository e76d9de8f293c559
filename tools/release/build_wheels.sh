#!/usr/bin/env bash
# Release wheels: one per Python (cp310-cp313, and cp39 for TF 2.20) for each supported
# TensorFlow minor, built with Bazel against that TensorFlow by the floor toolchain
# (tools/release/floor/: manylinux_2_28), repaired with auditwheel (TensorFlow's own libraries left to
# the installed TensorFlow) and checked at the floor by tools/release/check_wheels.py.
#
#   tools/release/build_wheels.sh                          # the whole matrix into dist/
#   tools/release/build_wheels.sh --python 3.11 --tf 2.21  # one wheel
#   tools/release/build_wheels.sh --venvs-only             # only prepare the build environments
#   tools/release/build_wheels.sh --arch aarch64 [--tf 2.21]   # the cp311 and cp312 wheels for aarch64,
#                         # cross-built here (tools/release/build_wheel.sh --arch: TensorFlow's aarch64
#                         # wheel for its headers and libraries, the x86_64 build venv of the
#                         # same Python and TensorFlow for the rest)
#
# Each (Python, TensorFlow) pair gets a build venv under ${TF_HVD_WHEEL_CACHE} (kept: the second
# run reuses it), and all builds share one Bazel output base and a disk cache there, so the core
# (no TensorFlow, no Python headers) compiles once for the whole matrix and a TensorFlow minor's
# kernels once for its four Pythons. The development build's cache (tools/build/build_lib.sh) is not
# touched. Needs: bazel, clang-19, lld-19 and debootstrap (tools/setup.sh installs them) and the
# Pythons (pyenv's python3.X or python3.X on PATH).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${TF_HVD_WHEEL_CACHE:-${HOME:-/root}/.cache/tf_hvd/wheel-build}"
OUT="${ROOT}/dist"
VENVS_ONLY=0
TOOLCHAIN_ARGS=()
ARCH="$(uname -m)"
source "${ROOT}/tools/release/wheel_matrix.sh"
PYTHONS="${WHEEL_PYTHONS}"
TFS="${WHEEL_TFS}"
log() { echo "[build_wheels] $*" >&2; }
usage() { sed -n '2,13p' "${BASH_SOURCE[0]}" >&2; exit 2; }

while (( $# )); do
  case "$1" in
    --python) PYTHONS="$2"; shift 2 ;;
    --tf) TFS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --venvs-only) VENVS_ONLY=1; shift ;;
    --toolchain) TOOLCHAIN_ARGS=(--toolchain "$2"); shift 2 ;;
    --arch) ARCH="$2"; shift 2 ;;
    *) usage ;;
  esac
done
ARCH_ARGS=()
if [[ "${ARCH}" != "$(uname -m)" ]]; then
  # aarch64 (Grace, Graviton): the Pythons of today's aarch64 systems with a TensorFlow that
  # ships aarch64 wheels for them (docs/install.md); an explicit --python list is kept.
  [[ "${PYTHONS}" != "${WHEEL_PYTHONS}" ]] || PYTHONS="3.11,3.12"
  ARCH_ARGS=(--arch "${ARCH}")
fi

build_venv() {  # build_venv PY TF: path of the build venv's python (created or updated)
  local py="$1" tf="$2" venv pin
  venv="${CACHE}/venvs/cp${py/./}-tf${tf}"
  pin="$(tf_pin "${tf}")"
  if [[ ! -x "${venv}/bin/python" ]]; then
    log "creating ${venv}"
    "$(find_python "${py}")" -m venv "${venv}"
  fi
  if ! "${venv}/bin/python" - "${pin}" <<'EOF' >/dev/null 2>&1
import sys
from importlib import metadata
assert metadata.version("tensorflow") == sys.argv[1]
for name in ("pybind11", "mpich", "setuptools", "wheel", "nvidia-nccl-cu12",
             "nvidia-cuda-runtime-cu12", "nvidia-cuda-nvcc-cu12"):
    metadata.version(name)
assert int(metadata.version("setuptools").split(".")[0]) >= 65
EOF
  then
    log "pip install tensorflow==${pin} into ${venv}"
    "${venv}/bin/python" -m pip install -q "tensorflow==${pin}" "${WHEEL_BUILD_PINS[@]}" >&2
    # The CUDA runtime's and NCCL's headers (the GPU code compiles against them; the
    # libraries are loaded at run time).
    "${venv}/bin/python" -m pip install -q --no-deps -r "${ROOT}/tools/requirements-cuda.txt" >&2
  fi
  echo "${venv}/bin/python"
}

mkdir -p "${CACHE}" "${OUT}"
IFS=, read -r -a pys <<<"${PYTHONS}"
IFS=, read -r -a tfs <<<"${TFS}"
for tf in "${tfs[@]}"; do
  for py in "${pys[@]}"; do
    in_matrix "${py}" "${tf}" || continue
    python="$(build_venv "${py}" "${tf}")"
    (( VENVS_ONLY )) && continue
    start=$SECONDS
    "${ROOT}/tools/release/build_wheel.sh" --python "${python}" --out "${OUT}" \
      --bazel-cache "${CACHE}/bazel" ${TOOLCHAIN_ARGS[@]+"${TOOLCHAIN_ARGS[@]}"} \
      ${ARCH_ARGS[@]+"${ARCH_ARGS[@]}"}
    log "cp${py/./} TensorFlow ${tf}${ARCH_ARGS[@]+ ${ARCH}}: $(( SECONDS - start )) s"
  done
done
# The opt-in Horovod import names (horovod_names/, docs/horovod-names.md): one pure-Python
# wheel for every Python and architecture, the extra tf_hvd[horovod].
(( VENVS_ONLY )) || "${TF_HVD_VENV:-${HOME:-/root}/.venvs/tf_hvd}/bin/python" -m pip wheel -q \
  --no-deps --no-build-isolation -w "${OUT}" "${ROOT}/horovod_names" >&2
wheels=("${OUT}"/tf_hvd-*.whl)
(( ${#ARCH_ARGS[@]} )) && wheels=("${OUT}"/tf_hvd-*_"${ARCH}".whl)
(( VENVS_ONLY )) || "${TF_HVD_VENV:-${HOME:-/root}/.venvs/tf_hvd}/bin/python" \
  "${ROOT}/tools/release/check_wheels.py" "${wheels[@]}"

#!/usr/bin/env bash
# Build the op library / extension module with Bazel and place it at tf_hvd/_hvd.so.
#   tools/build/build_lib.sh [--cuda] [extra bazel build flags]
#   tools/build/build_lib.sh --cuda      # the CUDA variant (NCCL for GPU tensors): needs the wheels of
#                                  # tools/requirements-cuda.txt (tools/setup.sh --cuda), no GPU;
#                                  # same as TF_HVD_CUDA=1 tools/build/build_lib.sh or --config=cuda
#   TF_HVD_LIB_DEST=/some/dir/_hvd.so tools/build/build_lib.sh   # place it there instead (setup.py
#                                     # does this for wheels, leaving tf_hvd/_hvd.so alone)
#   TF_HVD_BAZEL_OUTPUT_BASE=/dir tools/build/build_lib.sh   # a Bazel output base of its own, and no
#                                     # bazel-* links in the tree (release wheels: build_wheel.sh)
# Python (and so TensorFlow, pybind11, mpich) comes from PYTHON_BIN_PATH, default
# ${TF_HVD_VENV:-$HOME/.venvs/tf_hvd}/bin/python. Unchanged sources: ~2 s (Bazel cache).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "${ROOT}"
# PYTHON_BIN_PATH is only exported when it is needed: the repository rules re-run (and
# re-glob ~18k TF headers, ~20 s) whenever its value changes between Bazel commands, and
# tools/build/local_deps.bzl already defaults to $HOME/.venvs/tf_hvd/bin/python.
if [[ -z "${PYTHON_BIN_PATH:-}" && -n "${TF_HVD_VENV:-}" ]]; then
  export PYTHON_BIN_PATH="${TF_HVD_VENV}/bin/python"
fi
# Under `pip install` with build isolation these point at pip's throw-away environment,
# which has no TensorFlow; the repository rules must see the real interpreter's packages.
unset PYTHONPATH PYTHONNOUSERSITE PYTHONHOME PYTHONSAFEPATH || true
BAZEL="${BAZEL:-bazel}"

args=()
cuda="${TF_HVD_CUDA:-0}"
for a in "$@"; do
  # --config=cuda (e.g. from TF_HVD_BAZEL_FLAGS) means the CUDA target, built in the same
  # configuration as the CPU one so that both share Bazel's cache (see BUILD).
  if [[ "$a" == "--cuda" || "$a" == "--config=cuda" ]]; then cuda=1; else args+=("$a"); fi
done
target="_hvd_cpu.so"
if [[ "${cuda}" == 1 ]]; then target="_hvd_cuda.so"; fi

startup=()
if [[ -n "${TF_HVD_BAZEL_OUTPUT_BASE:-}" ]]; then
  startup=(--output_base="${TF_HVD_BAZEL_OUTPUT_BASE}")
  args+=(--symlink_prefix=/)
fi
"${BAZEL}" ${startup[@]+"${startup[@]}"} build ${args[@]+"${args[@]}"} "//:${target}"

if (( ${#startup[@]} )); then
  src="$("${BAZEL}" "${startup[@]}" info ${args[@]+"${args[@]}"} bazel-bin 2>/dev/null)/${target}"
else
  src="${ROOT}/bazel-bin/${target}"
fi
dst="${TF_HVD_LIB_DEST:-${ROOT}/tf_hvd/_hvd.so}"
mkdir -p "$(dirname "${dst}")"
if ! cmp -s "${src}" "${dst}" 2>/dev/null; then
  # Copy then rename: a process that has the old library mapped keeps working.
  cp -f "${src}" "${dst}.tmp.$$"
  chmod 0755 "${dst}.tmp.$$"
  mv -f "${dst}.tmp.$$" "${dst}"
  echo "build_lib: updated ${dst}" >&2
else
  echo "build_lib: ${dst} is up to date" >&2
fi

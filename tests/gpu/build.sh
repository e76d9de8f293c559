#!/usr/bin/env bash
# Fallback for a GPU machine without Bazel (with Bazel: tools/bazel build
# //tests/gpu:core_gpu_test, the same libraries as the CUDA library). Builds
# tests/gpu/core_gpu_test: the core (cc/common/ and every layer folder under it, no
# TensorFlow, no Gloo/MPI: a job of one process) with its NCCL backend and GPU paths, against
# CUDA 12 or 13 and NCCL from either the PyPI wheels or a system install. See tests/gpu/README.md.
#   tests/gpu/build.sh --list-sources   # the core sources it compiles, one per line
#   tests/gpu/build.sh                  # NVIDIA_ROOT = <python site-packages>/nvidia
#   NVIDIA_ROOT=/path/to/site-packages/nvidia tests/gpu/build.sh
#   CUDA_HOME=/usr/local/cuda NCCL_HOME=/usr tests/gpu/build.sh   # system CUDA / NCCL
#   OPT=-O0 tests/gpu/build.sh          # optimisation flags (default -O2; -O0 to check a build)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# Every .cc of the core's layers (a new folder is picked up by itself) but the Gloo and MPI
# backends and the CPU library's stand-in for the GPU backend; relative to ROOT, sorted.
# MPI=1 adds the MPI backend (for `mpiexec -n 2 core_gpu_test np2`): mpi.h and libmpi from
# MPI_HOME, else from the python3's mpich wheel.
core_sources() {
  local skip_mpi=(! -path 'cc/common/mpi/*')
  [[ "${MPI:-0}" == 1 ]] && skip_mpi=()
  (cd "${ROOT}" && find cc/common -name '*.cc' ! -path 'cc/common/gloo/*' \
     "${skip_mpi[@]}" ! -name gpu_backend_none.cc | LC_ALL=C sort)
}
if [[ "${1:-}" == "--list-sources" ]]; then core_sources; exit 0; fi
OUT="${OUT_DIR:-${ROOT}/tests/gpu/out}"
mkdir -p "${OUT}"
inc=() libs=()
if [[ -n "${CUDA_HOME:-}" ]]; then
  inc+=(-isystem "${CUDA_HOME}/include")
  libs+=(-L"${CUDA_HOME}/lib64" -Wl,-rpath,"${CUDA_HOME}/lib64" -lcudart)
  if [[ -n "${NCCL_HOME:-}" ]]; then
    inc+=(-isystem "${NCCL_HOME}/include")
    libs+=(-L"${NCCL_HOME}/lib" -Wl,-rpath,"${NCCL_HOME}/lib")
  fi
  libs+=(-lnccl)
else
  PY="${PYTHON:-python3}"
  NV="${NVIDIA_ROOT:-$("${PY}" -c 'import nvidia, os; print(list(nvidia.__path__)[0])')}"
  # CUDA 12 wheels: one directory per component; CUDA 13 wheels (nvidia-cuda-runtime, ...)
  # install everything under nvidia/cu13.
  for d in cuda_runtime/include cuda_nvcc/include cuda_cccl/include nccl/include cu13/include \
           cu13/include/cccl; do
    if [[ -d "${NV}/${d}" ]]; then inc+=(-isystem "${NV}/${d}"); fi
  done
  for d in cuda_runtime/lib nccl/lib cu13/lib; do
    if [[ -d "${NV}/${d}" ]]; then libs+=(-L"${NV}/${d}" -Wl,-rpath,"${NV}/${d}"); fi
  done
  cudart="$( (ls "${NV}"/cuda_runtime/lib/libcudart.so.* "${NV}"/cu13/lib/libcudart.so.* 2>/dev/null || true) | head -1)"
  libs+=(-l:"$(basename "${cudart}")" -l:libnccl.so.2)
fi
# One object per source, compiled JOBS at a time (every core by default), then one link.
defs="-DHAVE_GLOO=0 -DHAVE_MPI=0"
if [[ "${MPI:-0}" == 1 ]]; then
  MPI_HOME="${MPI_HOME:-$("${PYTHON:-python3}" -c 'import sys; print(sys.prefix)')}"
  inc+=(-isystem "${MPI_HOME}/include")
  libs+=(-L"${MPI_HOME}/lib" -Wl,-rpath,"${MPI_HOME}/lib" -lmpi)
  defs="-DHAVE_GLOO=0 -DHAVE_MPI=1"
fi
srcs=()
while read -r f; do srcs+=("${f}"); done < <(core_sources)
srcs+=("tests/gpu/core_gpu_test.cc")
name=core_gpu_test; [[ "${MPI:-0}" == 1 ]] && name=core_gpu_test_mpi
export ROOT OUT CXX="${CXX:-g++}" OPT="${OPT:--O2}" INC="${inc[*]}" DEFS="${defs}" OBJ="${OUT}/obj-${name}"
printf '%s\n' "${srcs[@]}" | xargs -P "${JOBS:-$(nproc)}" -I{} bash -c \
  'o="${OBJ}/$(echo {} | tr / _).o"; mkdir -p "${OBJ}";
   ${CXX} -std=c++17 ${OPT} -pthread ${DEFS} -I"${ROOT}" ${INC} \
     -c "${ROOT}/{}" -o "${o}"'
objs=()
for f in "${srcs[@]}"; do objs+=("${OBJ}/$(echo "${f}" | tr / _).o"); done
# --no-as-needed: the core defines the CUDA, NCCL and MPI functions it calls itself
# (forwarders into the libraries it loads at run time, cc/common/*/*_symbols.h), so the
# linker would drop the libraries; kept, they are loaded at start and found there.
"${CXX}" -pthread "${objs[@]}" -o "${OUT}/${name}" -Wl,--no-as-needed "${libs[@]}" -lrt -ldl
echo "built ${OUT}/${name}" >&2

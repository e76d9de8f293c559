#!/usr/bin/env bash
# The TF-free core on a GPU: per-op time of the NCCL path and of host staging against a
# device-to-device copy (tests/gpu/core_gpu_test.cc's `bench` scenario), a baseline build and
# the working tree interleaved in rounds. A GPU machine may have no git and no TensorFlow, so
# the baseline is prepared here and travels as an ignored folder:
#
#   python/benchmarks/gpu_core_bench.sh prepare [REV]    # REV's core (default HEAD) -> .gpu-baseline/
#   python/benchmarks/gpu_core_bench.sh run [ROUNDS]     # on the GPU machine (default 3 rounds)
#
# `run` builds both with tests/gpu/build.sh, runs the correctness scenarios on the working
# tree's build, then ROUNDS rounds of {baseline, new} on NCCL and on host staging
# (HOROVOD_GPU_OPERATIONS=gloo). Logs go to $RESULTS (default $OUT, else
# python/benchmarks/results/gpu-core). Figures and history: docs/gpu.md.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BASE="${ROOT}/.gpu-baseline"
cd "${ROOT}"
case "${1:-run}" in
  prepare)
    rev="${2:-HEAD}"
    rm -rf "${BASE}" && mkdir -p "${BASE}"
    git archive "${rev}" cc tests/gpu | tar -x -C "${BASE}"
    # The bench scenario of the working tree, so both builds measure the same way.
    cp tests/gpu/core_gpu_test.cc tests/gpu/build.sh "${BASE}/tests/gpu/"
    git rev-parse --short "${rev}" > "${BASE}/REV"
    echo "baseline $(cat "${BASE}/REV") in ${BASE} (carry it to the GPU machine)"
    ;;
  run)
    rounds="${2:-3}"
    results="${RESULTS:-${OUT:-${ROOT}/python/benchmarks/results/gpu-core}}"
    mkdir -p "${results}"
    [[ -d "${BASE}" ]] || { echo "no ${BASE}: run '$0 prepare' where git is" >&2; exit 2; }
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "${results}/machine.txt"
    echo "cores: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg); baseline: $(cat "${BASE}/REV")" \
      | tee -a "${results}/machine.txt"
    half=$(( $(nproc) / 2 > 0 ? $(nproc) / 2 : 1 ))
    (JOBS=${half} tests/gpu/build.sh 2>&1 | tail -2) &
    (JOBS=${half} "${BASE}/tests/gpu/build.sh" 2>&1 | tail -2) &
    wait
    new=tests/gpu/out/core_gpu_test old="${BASE}/tests/gpu/out/core_gpu_test"
    [[ -x "${new}" && -x "${old}" ]] || exit 1
    (timeout 300 "${new}"; echo "exit=$?") 2>&1 | tee "${results}/test.log"
    for path in nccl staging; do
      ops=nccl; [[ ${path} == staging ]] && ops=gloo
      for ((i = 1; i <= rounds; ++i)); do
        for v in baseline new; do
          b="${new}"; [[ ${v} == baseline ]] && b="${old}"
          echo "== ${path} ${v} round ${i}"
          HOROVOD_GPU_OPERATIONS=${ops} timeout 300 "${b}" bench 2>&1
        done
      done | tee "${results}/bench_${path}.log"
    done
    ;;
  *) echo "usage: $0 prepare [REV] | run [ROUNDS]" >&2; exit 2 ;;
esac

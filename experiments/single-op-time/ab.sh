#!/usr/bin/env bash
# A/B of two library trees with the same benchmark driver, interleaved: each round runs
# single_op_bench.py once with PYTHONPATH=A and once with PYTHONPATH=B (order flipped every
# round), tf_hvd over MPI at np=2. Writes ab/<label>-r<k>.json; ab_summary.py reads them.
#   experiments/single-op-time/ab.sh OLD_TREE NEW_TREE [rounds] [sizes] [np]
# e.g. experiments/single-op-time/ab.sh /work/wt-old25c5 /work/wt-perf47 5 1M,16M,256M
set -euo pipefail
A="$1"; B="$2"; ROUNDS="${3:-5}"; SIZES="${4:-1M,16M,256M}"; NP="${5:-2}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "${HERE}/../.." && pwd)"
OUT="${HERE}/ab"; mkdir -p "${OUT}"
label() { git -C "$1" rev-parse --short HEAD 2>/dev/null || basename "$1"; }
for r in $(seq 1 "${ROUNDS}"); do
  if (( r % 2 )); then order=("$A" "$B"); else order=("$B" "$A"); fi
  for tree in "${order[@]}"; do
    echo "round ${r}: $(label "${tree}") ($(cut -d' ' -f1-3 /proc/loadavg))"
    PYTHONPATH="${tree}" timeout 900 python "${ROOT}/python/benchmarks/single_op_bench.py" \
      --np "${NP}" --contenders tf_hvd_mpi --sizes "${SIZES}" --rounds 1 \
      --results-dir "${OUT}" --tag "$(label "${tree}")-np${NP}-r${r}" > /dev/null 2>&1 || echo "  failed"
  done
done
python "${HERE}/ab_summary.py" "${OUT}"

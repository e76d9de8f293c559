#!/usr/bin/env bash
# HOROVOD_INLINE_ROUNDS=1 against 0 in one tree: compare.py's training part (--quick, 3
# interleaved rounds each, tf_hvd over Gloo and MPI and the no-communication bound), one run
# per value, the order flipped every pair. Writes ab-inline-training/; ab_inline_summary.py
# reads it.
#   experiments/single-op-time/ab_inline_training.sh [pairs]
set -euo pipefail
PAIRS="${1:-2}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "${HERE}/../.." && pwd)"
OUT="${HERE}/ab-inline-training"; mkdir -p "${OUT}"
for i in $(seq 1 "${PAIRS}"); do
  if (( i % 2 )); then order=(1 0); else order=(0 1); fi
  for v in "${order[@]}"; do
    echo "pair ${i}: inline=${v} ($(cut -d' ' -f1-3 /proc/loadavg))"
    HOROVOD_INLINE_ROUNDS="${v}" timeout 900 python "${ROOT}/python/benchmarks/compare.py" \
      --quick --parts training --contenders tf_hvd_gloo,tf_hvd_mpi,no_allreduce \
      --results-dir "${OUT}" --tag "tr-${i}-${v}" > "${OUT}/log-${i}-${v}.txt" 2>&1 || echo "  failed"
  done
done
python "${HERE}/ab_inline_summary.py" "${OUT}"

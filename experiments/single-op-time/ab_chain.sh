#!/usr/bin/env bash
# The chain and fusion figures of two library trees, interleaved as ab.sh does: per round
# and tree, allreduce_bench.py's chain mode and fusion_bench.py (tf_hvd over MPI, np=2,
# --quick: fewer timed calls, the same warm-up). Writes ab-chain/; ab_chain_summary.py reads it.
#   experiments/single-op-time/ab_chain.sh BASE_TREE NEW_TREE [rounds]
set -euo pipefail
A="$1"; B="$2"; ROUNDS="${3:-3}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "${HERE}/../.." && pwd)"
OUT="${HERE}/ab-chain"; mkdir -p "${OUT}"
label() { git -C "$1" rev-parse --short HEAD 2>/dev/null || basename "$1"; }
for r in $(seq 1 "${ROUNDS}"); do
  if (( r % 2 )); then order=("$A" "$B"); else order=("$B" "$A"); fi
  for tree in "${order[@]}"; do
    echo "round ${r}: $(label "${tree}") ($(cut -d' ' -f1-3 /proc/loadavg))"
    PYTHONPATH="${tree}" timeout 900 python "${ROOT}/python/benchmarks/allreduce_bench.py" \
      --quick --modes chain --contenders tf_hvd_mpi --sizes 64K,1M,16M,256M \
      --results-dir "${OUT}" --tag "chain-$(label "${tree}")-r${r}" > /dev/null 2>&1 || echo "  chain failed"
    PYTHONPATH="${tree}" timeout 900 python "${ROOT}/python/benchmarks/fusion_bench.py" \
      --quick --contenders tf_hvd_mpi \
      --results-dir "${OUT}" --tag "fusion-$(label "${tree}")-r${r}" > /dev/null 2>&1 || echo "  fusion failed"
  done
done
python "${HERE}/ab_chain_summary.py" "${OUT}"

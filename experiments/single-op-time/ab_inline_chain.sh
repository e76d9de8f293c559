#!/usr/bin/env bash
# HOROVOD_INLINE_ROUNDS=1 against 0 in one tree, interleaved as ab_chain.sh does two trees:
# per round and value, allreduce_bench.py's chain mode and fusion_bench.py (tf_hvd over MPI,
# np=2, --quick). Writes ab-inline-chain/; ab_chain_summary.py reads it (labels inline1/inline0).
# placement.txt gets the host's placement (a cache line's round trip, placement_pingpong.c)
# before and after each run (25-45 ns near, 150-180 ns far on the development VM).
#   experiments/single-op-time/ab_inline_chain.sh [rounds]
set -euo pipefail
ROUNDS="${1:-3}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "${HERE}/../.." && pwd)"
OUT="${HERE}/ab-inline-chain"; mkdir -p "${OUT}"
PP="$(mktemp -d)/pp"; gcc -O2 -o "${PP}" "${HERE}/placement_pingpong.c" -lpthread
place() { echo "$1 $("${PP}" | tail -1)" >> "${OUT}/placement.txt"; }
: > "${OUT}/placement.txt"
for r in $(seq 1 "${ROUNDS}"); do
  if (( r % 2 )); then order=(1 0); else order=(0 1); fi
  for v in "${order[@]}"; do
    echo "round ${r}: inline${v} ($(cut -d' ' -f1-3 /proc/loadavg))"
    place "chain-inline${v}-r${r} before"
    HOROVOD_INLINE_ROUNDS="${v}" timeout 900 python "${ROOT}/python/benchmarks/allreduce_bench.py" \
      --quick --modes chain --contenders tf_hvd_mpi --sizes 64K,1M,16M,256M \
      --results-dir "${OUT}" --tag "chain-inline${v}-r${r}" > /dev/null 2>&1 || echo "  chain failed"
    place "chain-inline${v}-r${r} after"
    place "fusion-inline${v}-r${r} before"
    HOROVOD_INLINE_ROUNDS="${v}" timeout 900 python "${ROOT}/python/benchmarks/fusion_bench.py" \
      --quick --contenders tf_hvd_mpi \
      --results-dir "${OUT}" --tag "fusion-inline${v}-r${r}" > /dev/null 2>&1 || echo "  fusion failed"
    place "fusion-inline${v}-r${r} after"
  done
done
python "${HERE}/ab_chain_summary.py" "${OUT}"

#!/usr/bin/env bash
# The MLP's training against its own bound with two library trees, interleaved as ab.sh
# does: per round and tree, training_bench.py --models mlp --quick (tf_hvd over Gloo and
# MPI, each with the bound measured in its own processes). ab_training_summary.py reads it.
#   experiments/single-op-time/ab_training.sh BASE_TREE NEW_TREE [rounds]
set -euo pipefail
A="$1"; B="$2"; ROUNDS="${3:-2}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "${HERE}/../.." && pwd)"
OUT="${HERE}/ab-training"; mkdir -p "${OUT}"
label() { git -C "$1" rev-parse --short HEAD 2>/dev/null || basename "$1"; }
for r in $(seq 1 "${ROUNDS}"); do
  if (( r % 2 )); then order=("$A" "$B"); else order=("$B" "$A"); fi
  for tree in "${order[@]}"; do
    echo "round ${r}: $(label "${tree}") ($(cut -d' ' -f1-3 /proc/loadavg))"
    PYTHONPATH="${tree}" timeout 900 python "${ROOT}/python/benchmarks/training_bench.py" \
      --quick --models mlp --contenders tf_hvd_gloo,tf_hvd_mpi \
      --results-dir "${OUT}" --tag "training-$(label "${tree}")-r${r}" > /dev/null 2>&1 || echo "  failed"
  done
done
rm -rf "${OUT}/runs" "${OUT}/logs"
python - "${OUT}" <<'PY'
import collections, glob, json, os, re, statistics, sys
figs = collections.defaultdict(list)
for path in sorted(glob.glob(os.path.join(sys.argv[1], "training-*-r*.json"))):
    label = re.match(r"training-(.+)-r\d+\.json$", os.path.basename(path)).group(1)
    for rec in json.load(open(path))["results"]:
        bound = (rec.get("same_processes_bound") or {}).get("samples_per_s")
        if bound and rec.get("samples_per_s"):
            figs[(rec["contender"], rec["mode"], label)].append(rec["samples_per_s"] / bound)
for (name, mode, label), v in sorted(figs.items()):
    print("mlp %-5s %-12s %-12s fit/bound %.3f [%.3f-%.3f] (n=%d)" % (
        mode, name, label, statistics.median(v), min(v), max(v), len(v)))
PY

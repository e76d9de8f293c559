#!/bin/bash
# Slot sizes A/B, interleaved: per round and slot size, the chain of every size and the MLP's
# grouped step, each job after the placement probe (cpu_probe.c). The SHMSTAT figures
# (time inside ShmAllreduce::Allreduce per call, rank 0) need the library built with
# shm_stats_instrumentation.diff applied; without it the STEP and CHAIN figures still print.
#   bash ab.sh > ab.log
here="$(cd "$(dirname "$0")" && pwd)"
cc -O2 -pthread "${here}/../../python/benchmarks/cpu_probe.c" -o /tmp/cpu_probe
probe() { /tmp/cpu_probe 0 1 | python3 -c 'import json,sys; d=json.load(sys.stdin); print("rt %.0f ns copy %.1f" % (d["round_trip_ns"], d["peer_copy_gbps"]))'; }
for r in 1 2 3 4 5; do
  for sb in 1048576 262144 131072; do
    p=$(probe)
    c=$(HOROVOD_SHM_SLOT_BYTES=$sb TFHVD_SHM_STATS=1 timeout 300 tfhvdrun -np 2 python "${here}/by_hand_chain_sizes.py" 2>&1 | grep CHAIN | sed 's/.*CHAIN //')
    echo "r$r slot $sb [$p] CHAIN $c"
    p=$(probe)
    s=$(HOROVOD_SHM_SLOT_BYTES=$sb TFHVD_SHM_STATS=1 timeout 300 tfhvdrun -np 2 python "${here}/by_hand_grouped_step.py" 2>&1 | grep -E "STEP|\[0\].*SHMSTAT.*total" | sed 's/.*STEP //; s/.*SHMSTAT pid [0-9]* //' | tr '\n' ' ')
    echo "r$r slot $sb [$p] STEP $s"
  done
done

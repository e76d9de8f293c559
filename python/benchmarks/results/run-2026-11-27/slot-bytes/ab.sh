#!/bin/bash
# interleaved A/B of slot sizes: chain sizes and the MLP grouped step, probe before each job
cd /work/main; source ~/.venvs/tf_hvd/bin/activate
for r in 1 2 3 4 5; do
  for sb in 1048576 262144 131072; do
    p=$(/tmp/split/cpu_probe 0 1 | python3 -c 'import json,sys; d=json.load(sys.stdin); print("rt %.0f ns copy %.1f" % (d["round_trip_ns"], d["peer_copy_gbps"]))')
    c=$(HOROVOD_SHM_SLOT_BYTES=$sb TFHVD_SHM_STATS=1 timeout 300 tfhvdrun -np 2 python /tmp/split/chain_sizes.py 2>&1 | grep CHAIN | sed 's/.*CHAIN //')
    echo "r$r slot $sb [$p] CHAIN $c"
    p=$(/tmp/split/cpu_probe 0 1 | python3 -c 'import json,sys; d=json.load(sys.stdin); print("rt %.0f ns copy %.1f" % (d["round_trip_ns"], d["peer_copy_gbps"]))')
    s=$(HOROVOD_SHM_SLOT_BYTES=$sb TFHVD_SHM_STATS=1 timeout 300 tfhvdrun -np 2 python /tmp/split/grouped_step.py 2>&1 | grep -E "STEP|\[0\].*SHMSTAT.*total" | sed 's/.*STEP //; s/.*SHMSTAT pid [0-9]* //' | tr '\n' ' ')
    echo "r$r slot $sb [$p] STEP $s"
  done
done

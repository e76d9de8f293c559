#!/usr/bin/env bash
# The single copy against the slots, one job per knob value, interleaved, with the host's CPU
# placement (a cache line's round trip between CPUs 0 and 1, ns) before and after each job:
# one line per job, "sc=<HOROVOD_SHM_SINGLE_COPY> mode=<before>/<after> 1:<us> 4:<us> 16:<us>"
# (single_copy_probe.py: the median of 35 calls of one allreduce per call at 1, 4, 16 MiB).
#   MODES="off auto on" experiments/single-op-time/ab_single_copy.sh ROUNDS   (MPI=1: --mpi)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cc -O2 -pthread "${HERE}/placement_pingpong.c" -o /tmp/placement_pingpong
for i in $(seq 1 "$1"); do
  for v in ${MODES:-off auto}; do
    m=$(/tmp/placement_pingpong | awk '{print $3}')
    r=$(HOROVOD_SHM_SINGLE_COPY=$v tfhvdrun -np 2 ${MPI:+--mpi} python "${HERE}/single_copy_probe.py" 2>&1 | grep RES | sed 's/.*RES//')
    m2=$(/tmp/placement_pingpong | awk '{print $3}')
    echo "sc=$v mode=$m/$m2 $r"
  done
done

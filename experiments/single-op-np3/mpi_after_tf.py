"""What plain MPI adds to a TensorFlow step when the ranks outnumber the CPUs: every rank
repeats a barrier, a tf.function call producing a fresh tensor followed by mpi4py's
in-place Allreduce of a buffer of the same size ("step"), a barrier, and the tf.function
call alone ("floor"); the slowest rank's time per call, median over calls. MPI's added
time is step - floor, the same subtraction single_op_bench.py makes for tf_hvd; beside it
the bare Allreduce (no TensorFlow work between barriers).

    mpiexec -n 3 python experiments/single-op-np3/mpi_after_tf.py 4K,64K,1M [calls]
"""
import sys
import time

import numpy as np
import tensorflow as tf
from mpi4py import MPI

units = {"K": 1024, "M": 1024 ** 2}


def parse(s):
    return int(s[:-1]) * units[s[-1]] if s[-1] in units else int(s)


comm = MPI.COMM_WORLD
sizes = [parse(s) for s in sys.argv[1].split(",")]
calls = int(sys.argv[2]) if len(sys.argv) > 2 else 200
one = np.zeros(1, np.float32)
floor = tf.function(lambda t: t + 0.0)


def barrier():
    comm.Allreduce(MPI.IN_PLACE, one, op=MPI.SUM)


for nbytes in sizes:
    x = tf.constant(np.ones(nbytes // 4, np.float32))
    buf = np.ones(nbytes // 4, np.float32)
    rows = []
    for i in range(calls + 10):
        barrier()
        t0 = time.perf_counter()
        floor(x)
        comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
        t1 = time.perf_counter()
        barrier()
        t2 = time.perf_counter()
        floor(x)
        t3 = time.perf_counter()
        barrier()
        t4 = time.perf_counter()
        comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
        t5 = time.perf_counter()
        if i >= 10:
            rows.append([t1 - t0, t3 - t2, t5 - t4])
    worst = np.empty((calls, 3))
    comm.Allreduce(np.array(rows), worst, op=MPI.MAX)
    if comm.rank == 0:
        step, flo, bare = (np.median(worst[:, k]) * 1e6 for k in range(3))
        print("np=%d %7d B: step %.1f us  floor %.1f us  MPI added %.1f us  bare Allreduce "
              "%.1f us  (added / bare %.1f)" % (comm.size, nbytes, step, flo, step - flo, bare,
                                                (step - flo) / bare), flush=True)

"""16 MiB allreduce per call, 60 calls (median of the last 55 on rank 0); with
single_copy_stats.diff applied and TFHVD_SC_STATS=1 each rank prints its single-copy steps.

    TFHVD_SC_STATS=1 HOROVOD_SHM_SINGLE_COPY=on tfhvdrun -np 2 python experiments/single-op-time/single_copy_16m.py
"""
import sys, time, statistics, numpy as np, tensorflow as tf, tf_hvd as hvd
hvd.init()
s = 16 << 20
x = tf.constant(np.ones(s // 4, np.float32) * (hvd.rank() + 1))
op = tf.function(lambda t: hvd.allreduce(t, op=hvd.Sum, name="p"))
d = []
for i in range(60):
    t0 = time.perf_counter(); r = op(x); d.append(time.perf_counter() - t0)
if hvd.rank() == 0: print("RES 16:%.0f" % (statistics.median(d[5:]) * 1e6))

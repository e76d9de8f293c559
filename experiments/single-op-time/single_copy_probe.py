"""One allreduce per call at 1, 4 and 16 MiB (float32 sum, 40 calls, the median of the last
35, rank 0's own time); prints "RES 1:<us> 4:<us> 16:<us>". Used by ab_single_copy.sh."""
import sys, time, statistics, numpy as np, tensorflow as tf, tf_hvd as hvd
hvd.init()
out = []
for s in (1 << 20, 4 << 20, 16 << 20):
    x = tf.constant(np.ones(s // 4, np.float32) * (hvd.rank() + 1))
    op = tf.function(lambda t: hvd.allreduce(t, op=hvd.Sum, name="p%d" % s))
    d = []
    for i in range(40):
        t0 = time.perf_counter(); r = op(x); d.append(time.perf_counter() - t0)
    assert float(r[0]) == 3.0
    out.append("%d:%.0f" % (s >> 20, statistics.median(d[5:]) * 1e6))
if hvd.rank() == 0: print("RES", " ".join(out))

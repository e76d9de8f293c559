"""Where a single op's added time goes between the ranks: every rank's absolute start and
end of each call (time.perf_counter is CLOCK_MONOTONIC, one clock for every process on a
host), so the ranks' start skew, each rank's own duration and the end skew can be told
apart.

    tfhvdrun -np 2 python experiments/single-op-np3/skew_probe.py 4K [calls]
"""
import sys
import time

import numpy as np
import tensorflow as tf
import tf_hvd as hvd

units = {"K": 1024, "M": 1024 ** 2}
arg = sys.argv[1]
nbytes = int(arg[:-1]) * units[arg[-1]] if arg[-1] in units else int(arg)
calls = int(sys.argv[2]) if len(sys.argv) > 2 else 300
count = nbytes // 4

hvd.init()
x = tf.constant(np.ones(count, np.float32) * (hvd.rank() + 1))
one = tf.zeros([1])
op = tf.function(lambda t: hvd.allreduce(t, op=hvd.Sum, name="skew_probe"))
floor = tf.function(lambda t: t + 0.0)
bar = tf.function(lambda t: hvd.allreduce(t, op=hvd.Sum, name="skew_probe_barrier"))
rows = []
for i in range(calls + 20):
    b0 = time.perf_counter()
    bar(one)
    t0 = time.perf_counter()
    op(x)
    t1 = time.perf_counter()
    bar(one)
    t2 = time.perf_counter()
    floor(x)
    t3 = time.perf_counter()
    if i >= 20:
        rows.append([b0, t0, t1, t2, t3])
every = hvd.allgather(tf.constant([rows], tf.float64)).numpy()  # [ranks, calls, 5]
if hvd.rank() == 0:
    us = 1e6
    b0, t0, t1, t2, t3 = (every[:, :, k] for k in range(5))
    dur = (t1 - t0) * us                       # [ranks, calls]
    floor_d = (t3 - t2) * us
    slowest = dur.max(0)
    start_skew = (t0.max(0) - t0.min(0)) * us
    end_skew = (t1.max(0) - t1.min(0)) * us
    late = t0.argmax(0)
    late_dur = dur[late, np.arange(dur.shape[1])]
    early_dur = dur[1 - late, np.arange(dur.shape[1])] if dur.shape[0] == 2 else slowest
    bar_in_skew = (b0.max(0) - b0.min(0)) * us
    med = np.median
    print("%s np=%d calls=%d" % (arg, dur.shape[0], dur.shape[1]))
    print("  slowest per call %.1f  floor(slowest) %.1f  added %.1f" %
          (med(slowest), med(floor_d.max(0)), med(slowest) - med(floor_d.max(0))))
    print("  floor per rank   %s" % " ".join("%.1f" % med(f) for f in floor_d))
    print("  op per rank      %s" % " ".join("%.1f" % med(d) for d in dur))
    print("  start skew %.1f [p10 %.1f p90 %.1f]  end skew %.1f [p10 %.1f p90 %.1f]" %
          (med(start_skew), np.percentile(start_skew, 10), np.percentile(start_skew, 90),
           med(end_skew), np.percentile(end_skew, 10), np.percentile(end_skew, 90)))
    print("  late rank's op %.1f  early rank's op %.1f  barrier-entry skew %.1f" %
          (med(late_dur), med(early_dur), med(bar_in_skew)))
    print("  later starter is rank 0 in %.0f%% of calls" % (100 * np.mean(late == 0)))

"""A chain of dependent allreduces (Average) in one tf.function per size, 64 KiB-256 MiB;
rank 0 prints us per allreduce and GB/s.

    tfhvdrun -np 2 python by_hand_chain_sizes.py
"""
import sys, time, numpy as np, tensorflow as tf, tf_hvd as hvd
hvd.init()
sizes = [64<<10, 256<<10, 1<<20, 4<<20, 16<<20, 64<<20, 256<<20]
out = []
for sz in sizes:
    n = sz // 4
    L = 200 if sz <= 256<<10 else 50 if sz <= 4<<20 else 10 if sz <= 64<<20 else 4
    x = tf.constant(np.ones(n, np.float32))
    @tf.function
    def chain(x):
        y = x
        for i in range(L):
            y = hvd.allreduce(y, op=hvd.Average, name="c%d_%d" % (sz, i))
        return y
    chain(x)
    ts = []
    for r in range(5 if sz < 64<<20 else 3):
        t = time.perf_counter(); chain(x).numpy(); ts.append((time.perf_counter() - t) / L)
    m = float(np.median(ts))
    out.append("%dK %.1fus %.2fGB/s" % (sz >> 10, m * 1e6, sz / m / 1e9))
if hvd.rank() == 0: print("CHAIN", " | ".join(out))

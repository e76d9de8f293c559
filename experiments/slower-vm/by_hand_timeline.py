"""200 calls of one 2.68 MB allreduce, for a timeline.

    HOROVOD_TIMELINE=/tmp/tl.json tfhvdrun -np 2 python \
        experiments/slower-vm/by_hand_timeline.py
"""
import time, numpy as np, tensorflow as tf, tf_hvd as hvd
hvd.init()
n = 2678824 // 4
x = tf.constant(np.ones(n, np.float32))
@tf.function
def one_big():
    return hvd.allreduce(x, name="big")
for _ in range(20): one_big()
t = time.perf_counter()
for _ in range(200): one_big()
if hvd.rank() == 0: print("PERCALL %.3f ms" % ((time.perf_counter() - t) / 200 * 1e3))

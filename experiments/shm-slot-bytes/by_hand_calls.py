"""One 2.68 MB allreduce per tf.function call (single, 300 calls) against 50 dependent
ones in one tf.function (chain, 6 calls).

    tfhvdrun -np 2 python by_hand_calls.py single|chain
"""
import sys, time, numpy as np, tensorflow as tf, tf_hvd as hvd
hvd.init()
mode = sys.argv[1]
n = 2678824 // 4
x = tf.constant(np.ones(n, np.float32))
@tf.function
def single():
    return hvd.allreduce(x, name="big")
@tf.function
def chain():
    y = x
    for i in range(50):
        y = hvd.allreduce(y, name="c%d" % i)
    return y
f = single if mode == "single" else chain
reps = 300 if mode == "single" else 6
f()
t = time.perf_counter()
for _ in range(reps): f()
dt = (time.perf_counter() - t) / reps * 1e3
if hvd.rank() == 0: print("RESULT", mode, "%.3f ms per call" % dt)

"""ms per tf.function call: one multiply, a 10-float allreduce, one and two 2.68 MB ones.

    tfhvdrun -np 2 python experiments/slower-vm/by_hand_one_call.py
"""
import time, numpy as np, tensorflow as tf, tf_hvd as hvd
hvd.init()
n = 2678824 // 4
x = tf.constant(np.ones(n, np.float32))
small = tf.constant(np.ones(10, np.float32))
@tf.function
def one_big():
    return hvd.allreduce(x, name="big")
@tf.function
def one_big_hot():
    return hvd.allreduce(x * 1.0, name="bighot")
@tf.function
def two_chain():
    return hvd.allreduce(hvd.allreduce(x * 1.0, name="c0"), name="c1")
@tf.function
def one_small():
    return hvd.allreduce(small, name="small")
@tf.function
def mul_only():
    return x * 1.0
res = {}
fs = (("one_small", one_small), ("one_big", one_big), ("one_big_hot", one_big_hot), ("two_chain", two_chain), ("mul_only", mul_only))
for rnd in range(5):
    for name, f in fs:
        f()
        t = time.perf_counter()
        for _ in range(100): f()
        res.setdefault(name, []).append((time.perf_counter() - t) / 100 * 1e3)
if hvd.rank() == 0:
    for k, v in res.items(): print("BIG", k, "%.3f ms [%.3f-%.3f]" % (np.median(v), min(v), max(v)))

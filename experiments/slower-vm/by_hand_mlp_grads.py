"""The MLP's six gradient shapes: six allreduces, one grouped allreduce, one small one.

    tfhvdrun -np 2 python experiments/slower-vm/by_hand_mlp_grads.py
"""
import time, numpy as np, tensorflow as tf, tf_hvd as hvd
hvd.init()
# the MLP's gradient shapes (training_bench): take the sizes from the model
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import training_bench, keras
m = training_bench.build_model("mlp")
shapes = [v.shape for v in m.trainable_variables]
xs = [tf.constant(np.ones(s, np.float32)) for s in shapes]
@tf.function
def separate():
    return [hvd.allreduce(x, name="s%d" % i) for i, x in enumerate(xs)]
@tf.function
def grouped():
    return hvd.grouped_allreduce(xs)
@tf.function
def one():
    return hvd.allreduce(xs[-1], name="one")
res = {}
for rnd in range(5):
    for name, f in (("separate", separate), ("grouped", grouped), ("one", one)):
        f()
        t = time.perf_counter()
        for _ in range(100): f()
        res.setdefault(name, []).append((time.perf_counter() - t) / 100 * 1e3)
if hvd.rank() == 0:
    print("SHAPES", [tuple(s) for s in shapes], sum(int(np.prod(s)) for s in shapes) * 4 / 1e6, "MB")
    for k, v in res.items(): print("SIX", k, "%.3f ms [%.3f-%.3f]" % (np.median(v), min(v), max(v)))

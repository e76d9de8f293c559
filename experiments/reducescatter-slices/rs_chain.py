"""Times hvd.reducescatter and hvd.allgather of one flat float32 vector (the sharded
optimizer's two collectives) and hvd.allreduce of the same vector, inside one tf.function
chain, on the library TF_HVD_LIBRARY names. Run under tfhvdrun -np 2; rank 0 prints one
JSON line {op: {bytes: microseconds per call}}.

    TF_HVD_LIBRARY=/path/_hvd.so tfhvdrun -np 2 python rs_chain.py [--sizes 1M,16M]
"""
import argparse
import json
import time

import tensorflow as tf
import tf_hvd as hvd

p = argparse.ArgumentParser()
p.add_argument("--sizes", default="256K,4M,16M")
p.add_argument("--chain", type=int, default=20)
p.add_argument("--reps", type=int, default=7)
a = p.parse_args()
hvd.init()
n, r = hvd.size(), hvd.rank()


def nbytes(s):
    return int(s[:-1]) * {"K": 1 << 10, "M": 1 << 20}[s[-1]]


out = {"reducescatter": {}, "allgather": {}, "allreduce": {}}
for s in a.sizes.split(","):
    count = nbytes(s) // 4
    x = tf.fill([count], float(r + 1))
    part = tf.fill([count // n], float(r + 1))

    @tf.function
    def rs(x):
        for _ in range(a.chain):
            x = tf.tile(hvd.reducescatter(x, op=hvd.Sum) * 0.5, [n])
        return x

    @tf.function
    def ag(y):
        for _ in range(a.chain):
            y = hvd.allgather(y)[:count // n] * 0.5
        return y

    @tf.function
    def ar(x):
        for _ in range(a.chain):
            x = hvd.allreduce(x, op=hvd.Sum) * 0.5
        return x

    for name, fn, arg in (("reducescatter", rs, x), ("allgather", ag, part), ("allreduce", ar, x)):
        fn(arg)  # trace, warm up
        times = []
        for _ in range(a.reps):
            t = time.perf_counter()
            fn(arg).numpy()
            times.append((time.perf_counter() - t) / a.chain)
        times.sort()
        out[name][s] = round(times[len(times) // 2] * 1e6, 1)
if r == 0:
    print("RESULT " + json.dumps(out))

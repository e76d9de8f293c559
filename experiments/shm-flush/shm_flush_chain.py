"""The shared-memory allreduce's chain cost under one HOROVOD_SHM_READER_FLUSH setting.

A chain of allreduces (Average, values checked) inside one tf.function at 1, 16 and 64 MiB,
median of 7 calls, per allreduce in us; rank 0 prints one RESULT line. The setting is read
once at init, so an A/B runs one job per setting, interleaved, with cpu_probe.c's round trip
before and after each job to class it near or far (experiments/shm-flush/, this folder):

    for r in 1 2 3; do for m in off auto on; do
      HOROVOD_SHM_READER_FLUSH=$m tfhvdrun -np 2 python experiments/shm-flush/shm_flush_chain.py
    done; done
"""
import json, os, sys, time
import numpy as np
import tensorflow as tf
import tf_hvd as hvd
hvd.init()
out = {}
for mib, k in ((1, 50), (16, 20), (64, 8)):
    n = mib * 262144
    x0 = tf.ones([n], tf.float32)
    @tf.function
    def chain(x):
        for i in range(k):
            x = hvd.allreduce(x, op=hvd.Average, name="c%d_%d" % (mib, i))
        return x
    chain(x0).numpy()
    ts = []
    for _ in range(7):
        t = time.perf_counter(); y = chain(x0).numpy(); ts.append((time.perf_counter() - t) / k)
    assert y[0] == 1.0 and y[-1] == 1.0
    out[mib] = sorted(ts)[3] * 1e6
if hvd.rank() == 0:
    print("RESULT", json.dumps({"mode": os.environ.get("HOROVOD_SHM_READER_FLUSH"), "us": out}), flush=True)

"""Voluntary and involuntary context switches per call, thread by thread (/proc/self/task),
for 2000 calls of TF's floor (t + 0.0) and of one hvd.allreduce, after 50 warm-up calls.

    tfhvdrun -np 2 python experiments/single-op-time/thread_switches.py 4096
"""
import os, sys, time, statistics, numpy as np, tensorflow as tf, tf_hvd as hvd
hvd.init()
n = int(sys.argv[1]) // 4
x = tf.constant(np.ones(n, np.float32))
op = tf.function(lambda t: hvd.allreduce(t, op=hvd.Sum, name="p"))
floor = tf.function(lambda t: t + 0.0)
def snap():
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            st = open("/proc/self/task/%s/status" % tid).read().split("\n")
            comm = open("/proc/self/task/%s/comm" % tid).read().strip()
        except OSError: continue
        d = dict(l.split(":\t") for l in st if ":\t" in l)
        out[tid] = (comm, int(d["voluntary_ctxt_switches"]), int(d["nonvoluntary_ctxt_switches"]))
    return out
def measure(f, calls=2000):
    for _ in range(50): f(x)
    a = snap(); d = []
    for _ in range(calls):
        t0 = time.perf_counter(); f(x); d.append(time.perf_counter() - t0)
    b = snap()
    rows = []
    for tid, (comm, v, nv) in b.items():
        if tid in a:
            dv, dn = (v - a[tid][1]) / calls, (nv - a[tid][2]) / calls
            if dv + dn > 0.05: rows.append("%s:%s v%.2f n%.2f" % (tid, comm, dv, dn))
    return statistics.median(d) * 1e6, " | ".join(rows)
if hvd.rank() == 0: print("main tid", __import__("threading").get_native_id())
for name, f in (("floor", floor), ("op", op)):
    r = measure(f)
    if hvd.rank() == 0: print("%-5s %.1f us  %s" % (name, r[0], r[1]))

"""One hvd.allreduce per tf.function call, the slowest rank's time per call, and
TensorFlow's floor (t + 0.0) interleaved call by call; by hand, for perf.

    tfhvdrun -np 2 [--mpi] python experiments/single-op-time/probe.py 16M [calls] [--loop S]
    tfhvdrun -np 2 [--mpi] python experiments/single-op-time/probe.py 16M [calls] --chain N
    mpiexec -n 2 python experiments/single-op-time/probe.py 16M [calls] --mpi4py

--loop S: only call the allreduce for S seconds (for perf record), no floor.
"""
import statistics
import sys
import time

import numpy as np

units = {"K": 1024, "M": 1024 ** 2}
arg = sys.argv[1]
nbytes = int(arg[:-1]) * units[arg[-1]] if arg[-1] in units else int(arg)
calls = int(sys.argv[2]) if len(sys.argv) > 2 and not sys.argv[2].startswith("--") else 50
count = nbytes // 4

if "--mpi4py" in sys.argv:
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    buf = np.ones(count, np.float32)
    one = np.zeros(1, np.float32)
    d = []
    for i in range(calls + 5):
        comm.Allreduce(MPI.IN_PLACE, one)
        t0 = time.perf_counter()
        comm.Allreduce(MPI.IN_PLACE, buf)
        d.append(time.perf_counter() - t0)
    d = np.array(d[5:])
    worst = np.empty_like(d)
    comm.Allreduce(d, worst, op=MPI.MAX)
    if comm.rank == 0:
        print("mpi4py %s: median %.1f us [%.1f-%.1f]" % (arg, np.median(worst) * 1e6,
                                                        worst.min() * 1e6, worst.max() * 1e6))
    sys.exit(0)

import tensorflow as tf  # noqa: E402
import tf_hvd as hvd  # noqa: E402

hvd.init()
x = tf.constant(np.ones(count, np.float32) * (hvd.rank() + 1))
one = tf.zeros([1])
op = tf.function(lambda t: hvd.allreduce(t, op=hvd.Sum, name="probe"))
floor = tf.function(lambda t: t + 0.0)
bar = tf.function(lambda t: hvd.allreduce(t, op=hvd.Sum, name="probe_barrier"))
if "--chain" in sys.argv:
    length = int(sys.argv[sys.argv.index("--chain") + 1])

    @tf.function
    def chain(t):
        for i in range(length):
            t = hvd.allreduce(t, op=hvd.Average, name="probe_chain_%d" % i)
        return t
    for _ in range(3):
        chain(x)
    d = []
    for _ in range(calls):
        bar(one)
        t0 = time.perf_counter()
        chain(x)
        d.append(time.perf_counter() - t0)
    if hvd.rank() == 0:
        print("chain of %d %s: %.1f us per op" % (length, arg, np.median(d) / length * 1e6))
    sys.exit(0)
if "--loop" in sys.argv:
    seconds = float(sys.argv[sys.argv.index("--loop") + 1])
    for _ in range(5):
        op(x)
    end = time.time() + seconds
    n = 0
    while True:
        stop = bar(tf.constant([float(time.time() > end)])).numpy()[0]
        if stop:
            break
        op(x)
        n += 1
    if hvd.rank() == 0:
        print("loop: %d calls" % n)
    sys.exit(0)
import resource  # noqa: E402
d_op, d_floor = [], []
for i in range(calls + 5):
    if i == 5:
        r0 = resource.getrusage(resource.RUSAGE_SELF)
    bar(one)
    t0 = time.perf_counter()
    op(x)
    d_op.append(time.perf_counter() - t0)
    bar(one)
    t0 = time.perf_counter()
    floor(x)
    d_floor.append(time.perf_counter() - t0)
r1 = resource.getrusage(resource.RUSAGE_SELF)
usage = np.array([(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / calls * 1e6,
                  (r1.ru_minflt - r0.ru_minflt) / calls,
                  (r1.ru_nvcsw - r0.ru_nvcsw) / calls, (r1.ru_nivcsw - r0.ru_nivcsw) / calls])
usage_all = hvd.allgather(tf.constant(usage[None])).numpy()
both = tf.constant(np.array([d_op[5:], d_floor[5:]], np.float64))
allr = hvd.allgather(both[None]).numpy()  # [ranks, 2, calls]
worst = allr.max(axis=0)
if hvd.rank() == 0:
    o, f = np.median(worst[0]), np.median(worst[1])
    print("tf_hvd %s %s np=%d: per call %.1f us [%.1f-%.1f], floor %.1f us, added %.1f us"
          % ("mpi" if hvd.mpi_enabled() else "gloo", arg, hvd.size(), o * 1e6,
             worst[0].min() * 1e6, worst[0].max() * 1e6, f * 1e6, (o - f) * 1e6))
    for r, u in enumerate(usage_all):
        print("  rank %d per call (op + floor + 2 barriers): cpu %.0f us, minflt %.1f, "
              "voluntary cs %.1f, involuntary cs %.1f" % (r, u[0], u[1], u[2], u[3]))

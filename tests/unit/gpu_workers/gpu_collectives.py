"""Every collective on GPU tensors, checked exactly on every rank; run by tests/unit/test_gpu.py
at np=1 (NCCL) and np=2 (host staging, HOROVOD_GPU_OPERATIONS=gloo: one GPU holds one NCCL
rank). Prints GPU-COLLECTIVES-OK when everything held.

    HOROVOD_GPU_OPERATIONS=gloo python -m tf_hvd.runner -np 2 python tests/unit/gpu_workers/gpu_collectives.py
"""
import numpy as np
import tensorflow as tf

import tf_hvd as hvd

hvd.init()
r, n = hvd.rank(), hvd.size()
DTYPES = [tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.int32, tf.int64, tf.uint8, tf.int8]
FLOATS = {tf.float16, tf.bfloat16, tf.float32, tf.float64}


def on_gpu(t):
    assert "GPU" in t.device, (t.device, t)
    return t


def check(got, want, dtype, what):
    got = np.asarray(tf.cast(got, tf.float64).numpy())
    tol = 1e-2 if dtype in (tf.float16, tf.bfloat16) else 1e-6
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg="%s %s" % (what, dtype.name))


with tf.device("/GPU:0"):
    base = np.arange(1, 7, dtype=np.float64).reshape(2, 3)
    for dtype in DTYPES:
        x = on_gpu(tf.cast(base * (r + 1), dtype))
        ranks_sum = sum(k + 1 for k in range(n))
        check(on_gpu(hvd.allreduce(x, op=hvd.Sum)), base * ranks_sum, dtype, "sum")
        check(hvd.allreduce(x, op=hvd.Max), base * n, dtype, "max")
        check(hvd.allreduce(x, op=hvd.Min), base, dtype, "min")
        if dtype in FLOATS:
            check(hvd.allreduce(x, op=hvd.Average), base * ranks_sum / n, dtype, "average")
            check(hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5, postscale_factor=4.0),
                  base * ranks_sum * 2.0, dtype, "scaled sum")
            check(hvd.allreduce(x, op=hvd.Max, prescale_factor=2.0), base * n * 2.0, dtype,
                  "scaled max")
        # grouped: fused in one device buffer
        outs = hvd.grouped_allreduce([x, x * 2, x * 3], op=hvd.Sum)
        for k, o in enumerate(outs):
            check(on_gpu(o), base * ranks_sum * (k + 1), dtype, "grouped %d" % k)
        # ragged allgather
        g = on_gpu(hvd.allgather(tf.cast(tf.fill([r + 1, 2], r + 1), dtype)))
        want = np.concatenate([np.full([k + 1, 2], k + 1) for k in range(n)])
        check(g, want, dtype, "allgather")
        b = on_gpu(hvd.broadcast(x, root_rank=n - 1))
        check(b, base * n, dtype, "broadcast")
        a, splits = hvd.alltoall(tf.cast(tf.reshape(tf.range(2 * n) + 10 * r, [2 * n, 1]), dtype))
        want = np.concatenate([np.arange(2 * r, 2 * r + 2) + 10 * k for k in range(n)]).reshape(-1, 1)
        check(on_gpu(a), want, dtype, "alltoall")
        assert list(splits.numpy()) == [2] * n
        if dtype in FLOATS or dtype in (tf.int32, tf.int64):
            rs = on_gpu(hvd.reducescatter(tf.cast(tf.ones([3 * n + 1, 2]) * (r + 1), dtype),
                                          op=hvd.Sum))
            rows = (3 * n + 1) // n + (1 if r < (3 * n + 1) % n else 0)
            check(rs, np.full([rows, 2], ranks_sum), dtype, "reducescatter")

    # Many small tensors in one step: fused in device memory.
    many = [tf.fill([257], float(k + r)) for k in range(40)]
    outs = hvd.grouped_allreduce(many, op=hvd.Sum)
    for k, o in enumerate(outs):
        check(o, np.full([257], sum(k + q for q in range(n))), tf.float32, "fused %d" % k)

# Mixed CPU and GPU tensors in one step (one tf.function).
@tf.function
def mixed(a, b):
    with tf.device("/CPU:0"):
        c = hvd.allreduce(a, op=hvd.Sum, name="mixed_cpu")
    with tf.device("/GPU:0"):
        g = hvd.allreduce(b, op=hvd.Sum, name="mixed_gpu")
    return c, g

c, g = mixed(tf.ones([5]) * (r + 1), tf.ones([7]) * (r + 1))
assert "CPU" in c.device and "GPU" in g.device, (c.device, g.device)
check(c, np.full([5], sum(k + 1 for k in range(n))), tf.float32, "mixed cpu")
check(g, np.full([7], sum(k + 1 for k in range(n))), tf.float32, "mixed gpu")

hvd.barrier()
print("GPU-COLLECTIVES-OK rank", r, flush=True)
hvd.shutdown()

"""A rank of code written for Horovod, unchanged: it imports only Horovod's module paths
(the opt-in tf-hvd-horovod names) and reaches where such code reaches: hvd.mpi_ops's raw
ops and constants, process sets given at init, horovod.tensorflow.keras's optimizer and
horovod.common.exceptions. Run by test_horovod_names.py under `horovodrun`."""

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd
import horovod.tensorflow.keras as hvd_keras
from horovod.common.exceptions import HorovodInternalError
from horovod.tensorflow.mpi_ops import Sum, _allreduce, allgather

import checklib

DTYPES = (np.float32, np.float64, np.int32, np.int64)
SHAPES = ([], [5], [3, 4])


def value(r, shape, dtype):
    n = int(np.prod(shape)) if shape else 1
    return ((np.arange(n) % 5).reshape(shape) + r + 1).astype(dtype)


def check_raw_ops(ck, n, r, even):
    for dtype in DTYPES:
        for shape in SHAPES:
            label = "%s%s" % (np.dtype(dtype).name, shape)
            want = sum(value(q, shape, dtype) for q in range(n))
            ck.close("mpi_ops._allreduce " + label, _allreduce(value(r, shape, dtype)), want)
            ck.close("hvd.mpi_ops._allreduce op=Sum " + label,
                     hvd.mpi_ops._allreduce(value(r, shape, dtype), op=hvd.mpi_ops.Sum), want)
    ck.close("mpi_ops.allgather", allgather(tf.constant([r, 10 * r])),
             np.array([[q, 10 * q] for q in range(n)], dtype=np.int32).reshape(-1))
    out, splits = hvd.mpi_ops.alltoall(tf.fill([n], r))
    ck.close("mpi_ops.alltoall", out, np.arange(n, dtype=np.int32))
    ck.close("mpi_ops.alltoall splits", splits, np.ones(n, dtype=np.int32))
    ck.equal("Sum is hvd.Sum", Sum, hvd.Sum)
    if r in even.ranks:
        got = _allreduce(tf.constant([float(r)]), process_set=even)
        ck.close("_allreduce on a process set", got,
                 np.array([sum(even.ranks)], dtype=np.float32))
        ck.equal("process set rank", even.rank(), even.ranks.index(r))


def check_keras_optimizer(ck, n, r):
    # One SGD step on rank-specific data: every rank ends with the step of the mean
    # gradient, as one process training on all ranks' data.
    w0 = np.array([[0.5], [-1.0]], dtype=np.float32)
    x = np.array([[1.0 + r, 2.0]], dtype=np.float32)
    layer = tf.keras.layers.Dense(1, use_bias=False)
    layer.build((None, 2))
    layer.kernel.assign(w0)
    opt = hvd_keras.DistributedOptimizer(tf.keras.optimizers.SGD(0.1))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer(x))
    grads = tape.gradient(loss, layer.trainable_variables)
    opt.apply_gradients(zip(grads, layer.trainable_variables))
    mean_x = np.mean([[1.0 + q, 2.0] for q in range(n)], axis=0).reshape(2, 1)
    mean_x = mean_x.astype(np.float32)
    ck.close("DistributedOptimizer step", layer.kernel.numpy(), w0 - 0.1 * mean_x,
             rtol=1e-6)
    ck.expect(issubclass(HorovodInternalError, RuntimeError), "HorovodInternalError type")


def main():
    args = checklib.parse_args()
    even = hvd.ProcessSet(list(range(0, args.np, 2)))
    hvd.init(process_sets=[even])
    n, r = hvd.size(), hvd.rank()
    ck = checklib.Checker(r, n, args.result_dir)
    ck.equal("size", n, args.np)
    ck.equal("module is tf_hvd", hvd.__name__, "tf_hvd")
    ck.section("raw_ops", check_raw_ops, ck, n, r, even)
    ck.section("keras_optimizer", check_keras_optimizer, ck, n, r)
    raise SystemExit(ck.finish())


if __name__ == "__main__":
    main()

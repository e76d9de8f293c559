"""Validation errors triggered on purpose; every rank checks the error it gets.

Rank 1 submits something different from the other ranks. The core must fail
the collective on every rank with tf.errors.FailedPreconditionError (the type
Horovod raises) whose message names the tensor and what the ranks sent (checked leniently: the name,
and the differing values in some usual spelling). After each error the next
collective must work.
"""

import numpy as np
import tensorflow as tf

import tf_hvd as hvd

import checklib
from checklib import shape_forms

IAE = tf.errors.InvalidArgumentError
FPE = tf.errors.FailedPreconditionError


def _after(ck, label, n, r):
    """The next collective after an error works."""
    out = hvd.allreduce(tf.constant([r + 1.0, 2.0]), op=hvd.Sum, name="after_" + label)
    ck.close("allreduce after error '%s'" % label, out,
             np.array([n * (n + 1) / 2.0, 2.0 * n], np.float32))


def run_all(ck, n, r):
    odd = r == 1

    def mismatch(label, fn, contains, exc=FPE):
        e = ck.raises("error %s" % label, fn, exc, contains)
        if r == 0 and e is not None:
            ck.log("error %-32s -> %s: %s" % (label, type(e).__name__,
                                             checklib.error_text(e).strip()[:300]))
        _after(ck, label, n, r)

    mismatch("shape", lambda: hvd.allreduce(tf.zeros([4, 6] if odd else [4, 5]), op=hvd.Sum,
                                            name="grad_3"),
             ["grad_3", shape_forms([4, 5]), shape_forms([4, 6])])
    mismatch("dtype", lambda: hvd.allreduce(tf.zeros([3], tf.int32 if odd else tf.float32),
                                            name="dtype_check"),
             ["dtype_check", ("float32", "float"), "int32"])
    mismatch("allgather trailing dims",
             lambda: hvd.allgather(tf.zeros([r + 1, 4 if odd else 3]), name="gather_trailing"),
             ["gather_trailing", shape_forms([2, 4]) + shape_forms([4]),
              shape_forms([1, 3]) + shape_forms([3])])
    mismatch("allgather rank",
             lambda: hvd.allgather(tf.zeros([2, 3, 1] if odd else [2, 3]), name="gather_rank"),
             ["gather_rank", shape_forms([2, 3, 1]) + ("3 on rank 1", "rank 3", "3 dimensions")])
    mismatch("op type",
             lambda: (hvd.allgather(tf.zeros([2]), name="op_mix") if odd else
                      hvd.allreduce(tf.zeros([2]), name="op_mix")),
             ["op_mix", "allreduce", "allgather"])
    mismatch("reduce op",
             lambda: hvd.allreduce(tf.zeros([2]), op=hvd.Max if odd else hvd.Sum,
                                   name="reduce_op_mix"),
             ["reduce_op_mix", "sum", "max"])
    mismatch("root rank",
             lambda: hvd.broadcast(tf.zeros([2]), 1 if odd else 0, name="root_mix"),
             ["root_mix", "root"])
    mismatch("prescale factor",
             lambda: hvd.allreduce(tf.ones([2]), op=hvd.Sum, prescale_factor=2.0 if odd else 1.0,
                                   name="prescale_mix"),
             ["prescale_mix", "prescale"])
    mismatch("postscale factor",
             lambda: hvd.allreduce(tf.ones([2]), op=hvd.Sum,
                                   postscale_factor=3.0 if odd else 1.0, name="postscale_mix"),
             ["postscale_mix", "postscale"])
    mismatch("broadcast shape",
             lambda: hvd.broadcast(tf.zeros([3] if odd else [2]), 0, name="bcast_shape"),
             ["bcast_shape", shape_forms([3]), shape_forms([2])])
    mismatch("reducescatter shape",
             lambda: hvd.reducescatter(tf.zeros([5, 2] if odd else [5, 3]), op=hvd.Sum,
                                       name="rs_shape"),
             ["rs_shape", shape_forms([5, 2]), shape_forms([5, 3])])
    mismatch("alltoall trailing dims",
             lambda: hvd.alltoall(tf.zeros([n, 2 if odd else 3]), name="a2a_trailing"),
             ["a2a_trailing"])
    mismatch("grouped_allreduce member shape",
             lambda: hvd.grouped_allreduce([tf.zeros([2]), tf.zeros([3] if odd else [4])],
                                           op=hvd.Sum, name="group_mix"),
             ["group_mix"])

    @tf.function
    def in_function():
        return hvd.allreduce(tf.zeros([2, 3] if odd else [3, 2]), op=hvd.Sum, name="fn_grad")
    mismatch("shape inside tf.function", in_function,
             ["fn_grad", shape_forms([2, 3]), shape_forms([3, 2])])

    # Errors raised in Python before anything is sent (same on every rank).
    ck.raises("reducescatter op=Min", lambda: hvd.reducescatter(tf.zeros([2]), op=hvd.Min),
              ValueError, ["sum", "average"])
    ck.raises("unknown reduce op", lambda: hvd.allreduce(tf.zeros([2]), op=42), ValueError)
    ck.raises("op and average", lambda: hvd.allreduce(tf.zeros([2]), op=hvd.Sum, average=True),
              ValueError)
    # Unsupported as in Horovod: NotImplementedError.
    for op in ("Max", "Min", "Product"):
        ck.raises("IndexedSlices with %s" % op,
                  lambda op=op: hvd.allreduce(tf.IndexedSlices(tf.zeros([1, 2]),
                                                               tf.constant([0])),
                                              op=getattr(hvd, op)),
                  NotImplementedError, ["sum", "average"])
    for pre, post in ((2.0, 1.0), (1.0, 0.5)):
        ck.raises("IndexedSlices with pre=%g post=%g" % (pre, post),
                  lambda pre=pre, post=post: hvd.allreduce(
                      tf.IndexedSlices(tf.zeros([1, 2]), tf.constant([0])), op=hvd.Sum,
                      prescale_factor=pre, postscale_factor=post),
                  NotImplementedError, ["prescale_factor"])
        ck.raises("grouped IndexedSlices with pre=%g post=%g" % (pre, post),
                  lambda pre=pre, post=post: hvd.grouped_allreduce(
                      [tf.IndexedSlices(tf.zeros([1, 2]), tf.constant([0]))],
                      prescale_factor=pre, postscale_factor=post),
                  NotImplementedError, ["prescale_factor"])
    _after(ck, "python errors", n, r)

    # Invalid arguments detected on every rank alike.
    mismatch("alltoall splits do not add up",
             lambda: hvd.alltoall(tf.zeros([n, 2]), splits=[1] * (n - 1) + [2]),
             [], exc=IAE)
    mismatch("alltoall wrong number of splits",
             lambda: hvd.alltoall(tf.zeros([n + 1, 2]), splits=[1] * (n + 1)), [], exc=IAE)
    mismatch("alltoall dim0 not divisible",
             lambda: hvd.alltoall(tf.zeros([n + 1, 2])), [], exc=IAE)
    mismatch("broadcast root out of range",
             lambda: hvd.broadcast(tf.zeros([2]), n, name="root_range"),
             ["root"], exc=FPE)

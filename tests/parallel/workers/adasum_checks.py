"""op=hvd.Adasum across ranks, against a numpy reference of the Adasum formula.

Run under the launcher (see collective_launch.py). At a power-of-two size:
hvd.allreduce(op=Adasum) in float16/32/64 equals the tree of pairwise
Adasum(a, b) = (1 - a.b/(2|a|^2)) a + (1 - a.b/(2|b|^2)) b, with the same bits
on every rank; a grouped allreduce combines each tensor with its own
coefficients; DistributedGradientTape(op=Adasum) reduces gradients the same
way. At any other size: NotImplementedError naming the size.
"""

import sys

import numpy as np
import tensorflow as tf

import tf_hvd as hvd

import checklib


def adasum_pair(a, b):
    dot, aa, bb = float(np.dot(a, b)), float(np.dot(a, a)), float(np.dot(b, b))
    ca = 1 - dot / (2 * aa) if aa > 0 else 1.0
    cb = 1 - dot / (2 * bb) if bb > 0 else 1.0
    return ca * a + cb * b


def reference(vectors):
    level = [v.astype(np.float64).ravel() for v in vectors]
    while len(level) > 1:
        level = [adasum_pair(level[k], level[k + 1]) for k in range(0, len(level), 2)]
    return level[0].reshape(vectors[0].shape)


def value(rank, shape, seed, dtype):
    rng = np.random.RandomState(seed * 100 + rank)
    return rng.uniform(-1, 1, size=shape).astype(dtype)


def check_adasum(ck, n, r):
    tol = {np.float16: 3e-3, np.float32: 1e-5, np.float64: 1e-12}
    for seed, dtype in enumerate((np.float16, np.float32, np.float64)):
        shape = [7, 5]
        out = hvd.allreduce(tf.constant(value(r, shape, seed, dtype)), op=hvd.Adasum,
                            name="adasum_%d" % seed).numpy()
        want = reference([value(k, shape, seed, dtype) for k in range(n)])
        ck.close("allreduce Adasum %s" % np.dtype(dtype).name, out.astype(np.float64), want,
                 rtol=tol[dtype], atol=tol[dtype])
        everywhere = hvd.allgather(tf.constant(out.reshape(1, -1))).numpy()
        ck.expect(all((everywhere[k] == everywhere[0]).all() for k in range(n)),
                  "Adasum %s: the same bits on every rank" % np.dtype(dtype).name)
    # Fused: each tensor gets its own coefficients.
    shapes = [[10], [3, 3], [1]]
    outs = hvd.grouped_allreduce([tf.constant(value(r, s, 10 + i, np.float32))
                                  for i, s in enumerate(shapes)], op=hvd.Adasum,
                                 name="adasum_group")
    for i, s in enumerate(shapes):
        want = reference([value(k, s, 10 + i, np.float32) for k in range(n)])
        ck.close("grouped Adasum tensor %d" % i, outs[i].numpy().astype(np.float64), want,
                 rtol=1e-5, atol=1e-5)
    # The tape: the gradient of sum(w * x_r) is x_r, reduced with Adasum.
    w = tf.Variable(tf.zeros([6], tf.float32))
    x = tf.constant(value(r, [6], 20, np.float32))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(w * x)
    tape = hvd.DistributedGradientTape(tape, op=hvd.Adasum)
    grad = tape.gradient(loss, [w])[0]
    want = reference([value(k, [6], 20, np.float32) for k in range(n)])
    ck.close("tape Adasum gradient", grad.numpy().astype(np.float64), want, rtol=1e-5,
             atol=1e-5)


def check_delta_optimizer(ck, n, r):
    # Each rank steps SGD on its own gradient x_r (loss sum(w * x_r)); every
    # rank then holds w0 + Adasum(-lr * x_0, ..., -lr * x_{n-1}).
    lr = 0.5
    w0 = np.linspace(-1, 1, 6).astype(np.float32)
    w = tf.Variable(w0)
    x = tf.constant(value(r, [6], 30, np.float32))
    opt = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(lr),
                                   op=hvd.Adasum)
    ck.expect(type(opt).__name__ == "DistributedAdasumOptimizer", "delta optimizer chosen")
    for step in range(2):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(w * x)
        grads = tape.gradient(loss, [w])
        before = w.numpy().astype(np.float64)
        opt.apply_gradients(zip(grads, [w]))
        want = before + reference([-lr * value(k, [6], 30, np.float32) for k in range(n)])
        ck.close("delta Adasum step %d" % step, w.numpy().astype(np.float64), want,
                 rtol=1e-5, atol=1e-5)


def check_not_power_of_two(ck, n, r):
    ck.raises("Adasum at %d ranks" % n,
              lambda: hvd.allreduce(tf.ones([3]), op=hvd.Adasum), (NotImplementedError,),
              contains=("power-of-two", "this job has %d" % n))
    # No rank shuts down before every rank has checked (the check is local).
    ck.close("sum after the refusal", hvd.allreduce(tf.ones([1]), op=hvd.Sum),
             np.array([float(n)], np.float32))


def main():
    args = checklib.parse_args()
    hvd.init()
    n, r = hvd.size(), hvd.rank()
    ck = checklib.Checker(r, n, args.result_dir, args.only)
    if n & (n - 1) == 0:
        ck.section("adasum", check_adasum, ck, n, r)
        ck.section("delta", check_delta_optimizer, ck, n, r)
    else:
        ck.section("adasum", check_not_power_of_two, ck, n, r)
    code = ck.finish()
    hvd.shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())

"""Collective test cases usable in every execution mode.

A Case has a ``build()`` that creates the TensorFlow ops (run eagerly, traced
into a tf.function, or added to a TF1 graph and run by a session) and the
exact numpy result expected on this rank. Every rank builds the same cases in
the same order with the same op sequence, only the values differ per rank.
Values are small integers or halves so that sums and products are exact in
every dtype (including float16 and bfloat16).
"""

import numpy as np
import tensorflow as tf

import tf_hvd as hvd

DTYPES = (tf.uint8, tf.int8, tf.uint16, tf.int16, tf.int32, tf.int64, tf.float16,
          tf.bfloat16, tf.float32, tf.float64)
FLOATS = (tf.float16, tf.bfloat16, tf.float32, tf.float64)
SHAPES = ((), (0,), (7,), (3, 4, 5))
OPS = ("Sum", "Average", "Min", "Max", "Product")


class Case(object):
    """``matrix`` marks the dtype x shape x op sweep cases (see eager_subset)."""

    def __init__(self, label, build, expected, rtol=None, atol=None, matrix=False):
        self.label = label
        self.build = build
        self.expected = expected
        self.rtol = rtol
        self.atol = atol
        self.matrix = matrix


def npdt(dtype):
    return dtype.as_numpy_dtype


def values(dtype, shape, r, salt=0):
    """Rank-dependent small values: unsigned 0..5, signed -5..5, floats -2.5..2.5 in halves."""
    n = int(np.prod(shape, dtype=np.int64))
    base = (np.arange(n, dtype=np.int64) * 7 + r * 3 + salt) % 11
    if dtype == tf.bool:
        v = (base % 2) == 1
    elif dtype.is_unsigned:
        v = base % 6
    elif dtype.is_integer:
        v = base - 5
    else:
        v = (base - 5) * 0.5
    return np.asarray(v).reshape(shape).astype(npdt(dtype))


def const(x):
    return tf.constant(x)


def _scale_int(a, factor):
    """Horovod's integer scaling: multiplied in float64, truncated toward zero."""
    if factor == 1.0:
        return np.asarray(a, dtype=np.int64)
    return np.trunc(np.asarray(a, dtype=np.float64) * factor).astype(np.int64)


def reduce_expected(dtype, arrays, op, pre=1.0, post=1.0):
    """What allreduce gives, as in Horovod: post * R_r(pre * x_r); Average is the
    sum times post / size. Integers are scaled in float64 and truncated."""
    n = len(arrays)
    if dtype.is_integer:
        wide = [_scale_int(a, pre) for a in arrays]
        if op == "Average":
            return _scale_int(np.sum(wide, axis=0), post / n).astype(npdt(dtype))
    else:
        wide = [np.asarray(a, dtype=np.float64) * pre for a in arrays]
    if op == "Sum":
        res = np.sum(wide, axis=0)
    elif op == "Average":
        s = np.sum(wide, axis=0)
        res = np.trunc(s / n).astype(np.int64) if dtype.is_integer else s / n
    elif op == "Min":
        res = np.min(wide, axis=0)
    elif op == "Max":
        res = np.max(wide, axis=0)
    elif op == "Product":
        res = np.prod(wide, axis=0)
    else:
        raise ValueError(op)
    if post != 1.0:
        res = _scale_int(res, post) if dtype.is_integer else res * post
    return np.asarray(res).astype(npdt(dtype))


def row_split(d, n):
    """reducescatter's split of d rows: (counts, offsets)."""
    counts = [d // n + (1 if r < d % n else 0) for r in range(n)]
    offsets = [sum(counts[:r]) for r in range(n)]
    return counts, offsets


# ---------------------------------------------------------------------------


def allreduce_cases(n, r):
    cases = []

    def add(dtype, shape, op, pre=1.0, post=1.0, name=None):
        x = values(dtype, shape, r)
        exp = reduce_expected(dtype, [values(dtype, shape, q) for q in range(n)], op, pre, post)
        hop = getattr(hvd, op)
        label = "allreduce %s %s %s pre=%g post=%g" % (op, dtype.name, shape, pre, post)
        cases.append(Case(label, lambda: hvd.allreduce(const(x), op=hop, prescale_factor=pre,
                                                       postscale_factor=post, name=name), exp,
                          matrix=name is None))

    for dtype in DTYPES:
        for shape in SHAPES:
            for op in OPS:
                add(dtype, shape, op)
            if dtype.is_integer:
                add(dtype, shape, "Sum", pre=2.0, post=3.0)
            else:
                add(dtype, shape, "Sum", pre=0.5, post=3.0)
                add(dtype, shape, "Average", pre=0.5, post=2.0)
    # Factors that round: integers truncate toward zero after a float64 product.
    for dtype in (tf.int8, tf.uint8, tf.int32, tf.int64):
        add(dtype, (7,), "Sum", pre=0.5, post=1.5)
        add(dtype, (7,), "Average", pre=1.0, post=2.5)
        add(dtype, (7,), "Max", pre=0.7, post=1.0)
    # float16 is scaled in float32: 1.26 * 2.9 is 0x434f (a float64 product
    # rounded twice would give 0x434e).
    for pre, post in ((2.9, 1.0), (1.0, 2.9)):
        h = np.array([1.26, 1.299, 1.338] if r == 0 else [0.0] * 3, np.float16)
        cases.append(Case("allreduce float16 pre=%g post=%g rounds in float32" % (pre, post),
                          lambda h=h, pre=pre, post=post: hvd.allreduce(
                              const(h), op=hvd.Sum, prescale_factor=pre,
                              postscale_factor=post),
                          np.array([0x434f, 0x4389, 0x43c3], np.uint16).view(np.float16)))
    # Named ones (graph: op name; eager: tensor name).
    add(tf.float32, (3, 4), "Sum", name="named_allreduce_a")
    add(tf.int32, (5,), "Max", name="named_allreduce_b")
    # Default op is Average.
    x = values(tf.float32, (6,), r)
    exp = reduce_expected(tf.float32, [values(tf.float32, (6,), q) for q in range(n)], "Average")
    cases.append(Case("allreduce default op", lambda: hvd.allreduce(const(x)), exp))
    # Deprecated average= flag.
    cases.append(Case("allreduce average=False",
                      lambda: hvd.allreduce(const(x), average=False),
                      reduce_expected(tf.float32, [values(tf.float32, (6,), q)
                                                   for q in range(n)], "Sum")))
    # fp16 compression of float32/float64; integers pass through unchanged.
    for dtype in (tf.float32, tf.float64, tf.int32):
        xs = values(dtype, (3, 5), r)
        exp = reduce_expected(dtype, [values(dtype, (3, 5), q) for q in range(n)], "Average")
        cases.append(Case("allreduce fp16 compression %s" % dtype.name,
                          lambda xs=xs: hvd.allreduce(const(xs), op=hvd.Average,
                                                      compression=hvd.Compression.fp16),
                          exp, rtol=2e-3, atol=1e-3))  # float16 on the wire
    # bf16 compression: float32/float64 cross as bfloat16 and come back in their dtype.
    # The values (halves up to 2.5) and their sums are exact in bfloat16's 8-bit mantissa.
    for dtype, shape in ((tf.float32, (3, 5)), (tf.float64, (7,)), (tf.float16, (2, 2))):
        xs = values(dtype, shape, r)
        exp = reduce_expected(dtype, [values(dtype, shape, q) for q in range(n)], "Sum")
        cases.append(Case("allreduce bf16 compression %s" % dtype.name,
                          lambda xs=xs, dtype=dtype: _same_dtype(hvd.allreduce(
                              const(xs), op=hvd.Sum, compression=hvd.Compression.bf16), dtype),
                          exp))
    # A larger tensor (crosses small fusion thresholds, several chunks).
    big = (np.arange(300000, dtype=np.float32) % 13 + r).astype(np.float32)
    exp = sum((np.arange(300000, dtype=np.float32) % 13 + q) for q in range(n)).astype(np.float32)
    cases.append(Case("allreduce big float32", lambda: hvd.allreduce(const(big), op=hvd.Sum),
                      exp))
    # 1 MiB and more: on one host these may read the peers' tensors in place
    # (the first large calls of a job do), in place of the slots.
    for dtype, shape, op in ((tf.int32, (600, 700), "Sum"), (tf.float64, (150001,), "Average"),
                             (tf.float16, (3, 200000), "Max")):
        xs = values(dtype, shape, r, salt=5)
        exp = reduce_expected(dtype, [values(dtype, shape, q, salt=5) for q in range(n)], op)
        cases.append(Case("allreduce big %s %s" % (dtype.name, op),
                          lambda xs=xs, op=op: hvd.allreduce(const(xs), op=getattr(hvd, op)),
                          exp))
    return cases


def _same_dtype(tensor, dtype):
    """``tensor``, after checking that decompression gave back the input's dtype."""
    if tensor.dtype != dtype:
        raise AssertionError("compressed result is %s, the input was %s"
                             % (tensor.dtype.name, dtype.name))
    return tensor


def grouped_cases(n, r):
    cases = []
    group = ((tf.float32, (7,)), (tf.int32, (3, 4, 5)), (tf.float16, ()), (tf.float64, (0,)),
             (tf.bfloat16, (2, 3)), (tf.uint8, (4,)), (tf.int64, (1, 1)))
    for op, pre, post in (("Sum", 1.0, 1.0), ("Average", 1.0, 1.0), ("Max", 1.0, 1.0),
                          ("Min", 1.0, 1.0), ("Product", 1.0, 1.0), ("Sum", 2.0, 3.0)):
        xs = [values(dt, sh, r, salt=i) for i, (dt, sh) in enumerate(group)]
        exps = [reduce_expected(dt, [values(dt, sh, q, salt=i) for q in range(n)], op, pre, post)
                for i, (dt, sh) in enumerate(group)]
        hop = getattr(hvd, op)
        cases.append(Case(
            "grouped_allreduce %s pre=%g post=%g" % (op, pre, post),
            lambda xs=xs, hop=hop, pre=pre, post=post: tuple(hvd.grouped_allreduce(
                [const(x) for x in xs], op=hop, prescale_factor=pre, postscale_factor=post)),
            tuple(exps)))
    xs = [values(tf.float32, (4,), r, salt=9), values(tf.float32, (2, 2), r, salt=3)]
    exps = [reduce_expected(tf.float32, [values(tf.float32, x.shape, q, salt=s)
                                         for q in range(n)], "Sum")
            for x, s in zip(xs, (9, 3))]
    cases.append(Case("grouped_allreduce named",
                      lambda: tuple(hvd.grouped_allreduce([const(x) for x in xs], op=hvd.Sum,
                                                          name="named_group")),
                      tuple(exps)))
    floats = ((tf.float32, (6,)), (tf.float64, (2, 3)), (tf.bfloat16, (3,)), (tf.float16, ()))
    bf_in = [values(dt, sh, r, salt=i) for i, (dt, sh) in enumerate(floats)]
    bf_exp = tuple(reduce_expected(dt, [values(dt, sh, q, salt=i) for q in range(n)], "Sum")
                   for i, (dt, sh) in enumerate(floats))
    cases.append(Case("grouped_allreduce bf16 compression",
                      lambda: tuple(_same_dtype(t, dt) for t, (dt, _) in zip(
                          hvd.grouped_allreduce([const(x) for x in bf_in], op=hvd.Sum,
                                                compression=hvd.Compression.bf16), floats)),
                      bf_exp))
    cases.append(Case("grouped_allreduce empty list", lambda: tuple(hvd.grouped_allreduce([])),
                      ()))
    return cases


def allgather_cases(n, r):
    cases = []
    for dtype in DTYPES + (tf.bool,):
        for rows_of, trailing in ((lambda q: q % 3, (2, 3)), (lambda q: n - q, ()),
                                  (lambda q: q + 1, (4,))):
            x = values(dtype, (rows_of(r),) + trailing, r)
            exp = np.concatenate([values(dtype, (rows_of(q),) + trailing, q) for q in range(n)],
                                 axis=0)
            cases.append(Case("allgather %s rows=%s trailing=%s" % (
                dtype.name, [rows_of(q) for q in range(n)], trailing),
                lambda x=x: hvd.allgather(const(x)), exp))
    x = values(tf.float32, (r + 1, 2), r)
    exp = np.concatenate([values(tf.float32, (q + 1, 2), q) for q in range(n)])
    cases.append(Case("allgather named", lambda: hvd.allgather(const(x), name="named_gather"),
                      exp))
    # All ranks empty.
    cases.append(Case("allgather all empty",
                      lambda: hvd.allgather(tf.zeros([0, 3], tf.float32)),
                      np.zeros([0, 3], np.float32)))
    return cases


def broadcast_cases(n, r):
    cases = []
    for root in range(n):
        for dtype in DTYPES + (tf.bool,):
            shapes = SHAPES if dtype in (tf.float32, tf.bool) else ((3, 4, 5),)
            for shape in shapes:
                x = values(dtype, shape, r)
                exp = values(dtype, shape, root)
                cases.append(Case("broadcast root=%d %s %s" % (root, dtype.name, shape),
                                  lambda x=x, root=root: hvd.broadcast(const(x), root), exp,
                                  matrix=True))
    x = values(tf.int32, (5,), r)
    cases.append(Case("broadcast named", lambda: hvd.broadcast(const(x), n - 1,
                                                              name="named_bcast"),
                      values(tf.int32, (5,), n - 1)))
    return cases


def _a2a_splits(sender, receiver):
    return (sender + 2 * receiver) % 3


def _a2a_rows(dtype, q, count, width=2):
    k = np.arange(count * width).reshape(count, width)
    if dtype == tf.bool:
        return ((k + q) % 2 == 0)
    return (q * 40 + k % 40).astype(npdt(dtype))


def alltoall_cases(n, r):
    cases = []
    for dtype in (tf.float32, tf.int32, tf.int64, tf.float16, tf.uint8, tf.bfloat16, tf.bool,
                  tf.float64, tf.int8):
        def rows(q):
            return _a2a_rows(dtype, q, sum(_a2a_splits(q, p) for p in range(n)))
        splits = [_a2a_splits(r, p) for p in range(n)]
        x = rows(r)
        parts = []
        for p in range(n):
            sp = [_a2a_splits(p, j) for j in range(n)]
            off = sum(sp[:r])
            parts.append(rows(p)[off:off + sp[r]])
        exp = np.concatenate(parts, axis=0)
        recv = np.array([_a2a_splits(p, r) for p in range(n)], np.int32)
        cases.append(Case("alltoall uneven %s splits=%s" % (dtype.name, splits),
                          lambda x=x, splits=splits: hvd.alltoall(const(x), splits=splits),
                          (exp, recv)))
    # Even split (no splits given), 2 rows to each rank.
    x = _a2a_rows(tf.float32, r, 2 * n, width=3)
    exp = np.concatenate([_a2a_rows(tf.float32, p, 2 * n, width=3)[2 * r:2 * r + 2]
                          for p in range(n)])
    # Without splits the output alone is returned (as Horovod).
    cases.append(Case("alltoall even split", lambda: hvd.alltoall(const(x)), exp))
    # splits as an int64 tensor, named.
    splits = [_a2a_splits(r, p) for p in range(n)]
    xs = _a2a_rows(tf.int32, r, sum(splits))
    parts = []
    for p in range(n):
        sp = [_a2a_splits(p, j) for j in range(n)]
        parts.append(_a2a_rows(tf.int32, p, sum(sp))[sum(sp[:r]):sum(sp[:r]) + sp[r]])
    cases.append(Case("alltoall int64 splits named",
                      lambda: hvd.alltoall(const(xs), splits=tf.constant(splits, tf.int64),
                                           name="named_a2a"),
                      (np.concatenate(parts), np.array([_a2a_splits(p, r) for p in range(n)],
                                                       np.int32))))
    return cases


def reducescatter_cases(n, r):
    cases = []
    for d in (2 * n + 1, 1, 2 * n):
        counts, offsets = row_split(d, n)
        for dtype in DTYPES:
            for op in ("Sum", "Average"):
                x = values(dtype, (d, 3), r)
                full = reduce_expected(dtype, [values(dtype, (d, 3), q) for q in range(n)], op)
                exp = full[offsets[r]:offsets[r] + counts[r]]
                hop = getattr(hvd, op)
                cases.append(Case("reducescatter %s %s dim0=%d" % (op, dtype.name, d),
                                  lambda x=x, hop=hop: hvd.reducescatter(const(x), op=hop),
                                  exp, matrix=True))
    d = 2 * n + 1
    counts, offsets = row_split(d, n)
    for dtype in (tf.float32, tf.float64):
        x = values(dtype, (d, 4), r)
        full = reduce_expected(dtype, [values(dtype, (d, 4), q) for q in range(n)], "Sum")
        cases.append(Case("reducescatter bf16 compression %s" % dtype.name,
                          lambda x=x, dtype=dtype: _same_dtype(hvd.reducescatter(
                              const(x), op=hvd.Sum, compression=hvd.Compression.bf16), dtype),
                          full[offsets[r]:offsets[r] + counts[r]]))
    for pre, post in ((0.5, 3.0), (2.0, 0.25)):
        x = values(tf.float32, (d, 2), r)
        full = reduce_expected(tf.float32, [values(tf.float32, (d, 2), q) for q in range(n)],
                               "Sum", pre, post)
        cases.append(Case("reducescatter Sum pre=%g post=%g" % (pre, post),
                          lambda x=x, pre=pre, post=post: hvd.reducescatter(
                              const(x), op=hvd.Sum, prescale_factor=pre,
                              postscale_factor=post),
                          full[offsets[r]:offsets[r] + counts[r]]))
    x = values(tf.float64, (d, 2), r)
    full = reduce_expected(tf.float64, [values(tf.float64, (d, 2), q) for q in range(n)],
                           "Average")
    cases.append(Case("reducescatter default op (Average)",
                      lambda: hvd.reducescatter(const(x)), full[offsets[r]:offsets[r] + counts[r]]))
    # Integer scale factors as allreduce's (float64 product, truncated), for
    # reducescatter and grouped_reducescatter.
    for dtype, op, pre, post in ((tf.int32, "Sum", 0.5, 1.5), (tf.int8, "Average", 1.0, 2.5),
                                 (tf.uint8, "Sum", 0.7, 1.0)):
        xi = values(dtype, (d, 3), r)
        full = reduce_expected(dtype, [values(dtype, (d, 3), q) for q in range(n)], op, pre,
                               post)
        hop = getattr(hvd, op)
        cases.append(Case("reducescatter %s %s pre=%g post=%g" % (op, dtype.name, pre, post),
                          lambda xi=xi, hop=hop, pre=pre, post=post: hvd.reducescatter(
                              const(xi), op=hop, prescale_factor=pre, postscale_factor=post),
                          full[offsets[r]:offsets[r] + counts[r]]))
    xi = values(tf.int32, (d, 3), r)
    xh = np.full((d, 1), 1.26 if r == 0 else 0.0, np.float16)
    full_i = reduce_expected(tf.int32, [values(tf.int32, (d, 3), q) for q in range(n)], "Sum",
                             0.5, 2.9)
    # float16 in float32 at each step: f16(f32(2.9) * f16(f32(0.5) * f32(1.26))).
    pre_h = np.float16(np.float32(0.5) * np.float32(np.float16(1.26)))
    full_h = np.full((d, 1), np.float16(np.float32(2.9) * np.float32(pre_h)), np.float16)
    cases.append(Case("grouped_reducescatter int32 and float16 scaled",
                      lambda: tuple(hvd.grouped_reducescatter(
                          [const(xi), const(xh)], op=hvd.Sum, prescale_factor=0.5,
                          postscale_factor=2.9)),
                      (full_i[offsets[r]:offsets[r] + counts[r]],
                       full_h[offsets[r]:offsets[r] + counts[r]])))
    return cases


# ---------------------------------------------------------------------------
# Gradients: loss_r = sum(y_r * w_r) on rank r. Expected values follow Horovod
# 0.28's gradient definitions: allreduce (Sum/Average) and grouped allreduce give
# d(sum_r loss_r)/d x_q; allgather and broadcast average the incoming gradients
# over ranks (allreduce with op=Average); reducescatter allgathers them (times
# size() for Sum). Min/Max/Product (tf_hvd's own, Horovod's is not a
# derivative) give d(sum_r loss_r)/d x_q.


def _weights(r, shape, dtype=np.float32):
    n = int(np.prod(shape, dtype=np.int64))
    return ((r + 1) * (1 + np.arange(n) % 4)).reshape(shape).astype(dtype)


def _distinct_values(q, shape, dtype=np.float32):
    """Values that differ across ranks at every element (no ties for Min/Max)."""
    n = int(np.prod(shape, dtype=np.int64))
    i = np.arange(n)
    return (((i * 5 + q * 3) % 7) - 3 + q * 0.25).reshape(shape).astype(dtype)


def _grad_through(fn, x, w):
    x = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
        loss = tf.reduce_sum(y * tf.constant(w))
    return tape.gradient(loss, x)


def gradient_cases(n, r):
    cases = []
    shape = (3, 4)
    for dtype in (np.float32, np.float64):
        xs = [_distinct_values(q, shape, dtype) for q in range(n)]
        ws = [_weights(q, shape, dtype) for q in range(n)]
        total_w = np.sum(ws, axis=0)
        for op, pre, post in (("Sum", 1.0, 1.0), ("Sum", 0.5, 3.0), ("Average", 1.0, 1.0),
                              ("Average", 2.0, 0.5), ("Max", 1.0, 1.0), ("Min", 1.0, 1.0),
                              ("Product", 1.0, 1.0)):
            hop = getattr(hvd, op)
            if op == "Sum":
                exp = total_w * pre * post
            elif op == "Average":
                exp = total_w * pre * post / n
            elif op in ("Max", "Min"):
                ext = np.max(xs, axis=0) if op == "Max" else np.min(xs, axis=0)
                exp = total_w * (xs[r] == ext)
            else:
                others = np.prod([xs[q] for q in range(n) if q != r], axis=0)
                exp = total_w * others
            cases.append(Case(
                "grad allreduce %s pre=%g post=%g %s" % (op, pre, post, np.dtype(dtype).name),
                lambda hop=hop, pre=pre, post=post, x=xs[r], w=ws[r]: _grad_through(
                    lambda t: hvd.allreduce(t, op=hop, prescale_factor=pre,
                                            postscale_factor=post), x, w),
                exp.astype(dtype)))

    # grouped_allreduce: Sum of two tensors.
    xa = [_distinct_values(q, (5,)) for q in range(n)]
    xb = [_distinct_values(q, (2, 3)) + 1 for q in range(n)]
    wa = [_weights(q, (5,)) for q in range(n)]
    wb = [_weights(q, (2, 3)) * 2 for q in range(n)]

    def grouped_grad():
        a, b = tf.constant(xa[r]), tf.constant(xb[r])
        with tf.GradientTape(persistent=True) as tape:
            tape.watch([a, b])
            ya, yb = hvd.grouped_allreduce([a, b], op=hvd.Sum)
            loss = tf.reduce_sum(ya * wa[r]) + tf.reduce_sum(yb * wb[r])
        return tuple(tape.gradient(loss, [a, b]))
    cases.append(Case("grad grouped_allreduce Sum", grouped_grad,
                      (np.sum(wa, axis=0), np.sum(wb, axis=0))))

    # allgather: rank q contributes q % 3 rows (0 on rank 0).
    rows = [q % 3 for q in range(n)]
    total = sum(rows)
    offs = [sum(rows[:q]) for q in range(n)]
    pattern = (1 + np.arange(total * 3).reshape(total, 3)).astype(np.float32)
    cs = [(q + 1) * pattern for q in range(n)]
    exp = (np.sum(cs, axis=0, dtype=np.float64) / n)[offs[r]:offs[r] + rows[r]]
    cases.append(Case("grad allgather (Horovod: averaged)", lambda: _grad_through(
        hvd.allgather, _distinct_values(r, (rows[r], 3)), cs[r]), exp.astype(np.float32),
        rtol=1e-6))

    # broadcast from every root: the root gets the mean of all weights, others 0.
    for root in range(n):
        ws = [_weights(q, (4,)) for q in range(n)]
        exp = (np.sum(ws, axis=0, dtype=np.float64) / n if r == root
               else np.zeros(4)).astype(np.float32)
        cases.append(Case("grad broadcast root=%d (Horovod: averaged)" % root,
                          lambda root=root, w=ws[r]:
                          _grad_through(lambda t: hvd.broadcast(t, root),
                                        _distinct_values(r, (4,)), w), exp, rtol=1e-6))

    # alltoall with uneven splits: the gradient of each row sent to p is p's weight
    # for the row where p received it.
    def a2a_layout(q):
        sp = [_a2a_splits(q, p) for p in range(n)]
        return sp, [sum(sp[:p]) for p in range(n)]
    recv_rows = [sum(_a2a_splits(p, q) for p in range(n)) for q in range(n)]
    cw = [(q + 1) * (1 + np.arange(recv_rows[q] * 2).reshape(recv_rows[q], 2)).astype(
        np.float32) for q in range(n)]
    sp_r, off_r = a2a_layout(r)
    exp_parts = []
    for p in range(n):
        # Position of rank r's block inside p's output: after the blocks of ranks < r.
        start = sum(_a2a_splits(j, p) for j in range(r))
        exp_parts.append(cw[p][start:start + sp_r[p]])
    exp = np.concatenate(exp_parts, axis=0)
    cases.append(Case("grad alltoall uneven", lambda: _grad_through(
        lambda t: hvd.alltoall(t, splits=sp_r)[0], _distinct_values(r, (sum(sp_r), 2)), cw[r]),
        exp))

    # reducescatter: d not divisible by n.
    d = 2 * n + 1
    counts, offsets = row_split(d, n)
    ws = [_weights(q, (counts[q], 2)) for q in range(n)]
    full_w = np.concatenate(ws, axis=0)
    for op, pre, post in (("Sum", 1.0, 1.0), ("Average", 1.0, 1.0), ("Sum", 0.5, 3.0),
                          ("Average", 2.0, 0.25)):
        hop = getattr(hvd, op)
        # Horovod: allgather(g), times size() for Sum.
        exp = full_w * pre * post * (n if op == "Sum" else 1)
        cases.append(Case("grad reducescatter %s pre=%g post=%g" % (op, pre, post),
                          lambda hop=hop, pre=pre, post=post: _grad_through(
                              lambda t: hvd.reducescatter(t, op=hop, prescale_factor=pre,
                                                          postscale_factor=post),
                              _distinct_values(r, (d, 2)), ws[r]),
                          exp.astype(np.float32)))
    return cases


# ---------------------------------------------------------------------------


def _slices(q):
    k = q + 1
    vals = (np.arange(k * 2).reshape(k, 2) + 10 * q).astype(np.float32)
    idx = np.array([(q + j) % 5 for j in range(k)], np.int64)
    return vals, idx


def indexed_slices_cases(n, r):
    cases = []
    vals_r, idx_r = _slices(r)
    all_vals = np.concatenate([_slices(q)[0] for q in range(n)])
    all_idx = np.concatenate([_slices(q)[1] for q in range(n)])
    dense = np.zeros((5, 2), np.float32)
    np.add.at(dense, all_idx, all_vals)
    for op, div in (("Sum", 1.0), ("Average", float(n))):
        hop = getattr(hvd, op)

        def build(hop=hop):
            s = tf.IndexedSlices(tf.constant(vals_r), tf.constant(idx_r),
                                 dense_shape=tf.constant([5, 2], tf.int64))
            out = hvd.allreduce(s, op=hop)
            return (out.values, out.indices, tf.convert_to_tensor(out))
        cases.append(Case("allreduce IndexedSlices %s" % op, build,
                          (all_vals / np.float32(div), all_idx,
                           (dense / np.float32(div)).astype(np.float32))))

    # Integer values: Average divides with "/" as Horovod (int32 -> float64).
    def int_average():
        s = tf.IndexedSlices(tf.constant(vals_r.astype(np.int32)), tf.constant(idx_r),
                             dense_shape=tf.constant([5, 2], tf.int64))
        out = hvd.allreduce(s, op=hvd.Average)
        return (out.values, out.indices)
    cases.append(Case("allreduce IndexedSlices Average int32 values", int_average,
                      (all_vals.astype(np.float64) / n, all_idx)))

    # The IndexedSlices gradient of tf.gather, reduced like DistributedGradientTape does.
    params = np.arange(12, dtype=np.float32).reshape(6, 2)
    idxs = [np.array([q % 6, (q + 1) % 6, 0], np.int32) for q in range(n)]
    ws = [(q + 1) * np.ones((3, 2), np.float32) for q in range(n)]
    exp = np.zeros((6, 2), np.float32)
    for q in range(n):
        np.add.at(exp, idxs[q], ws[q])
    exp /= n

    def gather_grad():
        p = tf.constant(params)
        with tf.GradientTape() as tape:
            tape.watch(p)
            loss = tf.reduce_sum(tf.gather(p, idxs[r]) * ws[r])
        g = tape.gradient(loss, p)
        reduced = hvd.allreduce(g, op=hvd.Average)
        return (tf.constant(isinstance(g, tf.IndexedSlices)), tf.convert_to_tensor(reduced))
    cases.append(Case("allreduce IndexedSlices gradient of gather", gather_grad,
                      (np.array(True), exp)))
    return cases


def misc_cases(n, r):
    cases = [
        Case("size_op", lambda: hvd.size_op(), np.int32(n)),
        Case("size_op(0) (process set id first)", lambda: hvd.size_op(0), np.int32(n)),
        Case("process_set_included_op", lambda: hvd.process_set_included_op(), np.int32(1)),
        Case("rank_op", lambda: hvd.rank_op(), np.int32(r)),
        Case("local_size_op", lambda: hvd.local_size_op(), np.int32(n)),
        Case("local_rank_op", lambda: hvd.local_rank_op(), np.int32(r)),
    ]
    x = values(tf.float32, (4,), r)
    exp = reduce_expected(tf.float32, [values(tf.float32, (4,), q) for q in range(n)], "Sum")

    def scoped(ignore):
        with tf.name_scope("some_scope"):
            return hvd.allreduce(const(x), op=hvd.Sum, name="scoped_ar_%d" % ignore,
                                 ignore_name_scope=bool(ignore))
    cases.append(Case("allreduce in name scope", lambda: scoped(0), exp))
    cases.append(Case("allreduce ignore_name_scope", lambda: scoped(1), exp))
    return cases


def all_cases(n, r):
    cases = []
    for make in (allreduce_cases, grouped_cases, allgather_cases, broadcast_cases,
                 alltoall_cases, reducescatter_cases, gradient_cases, indexed_slices_cases,
                 misc_cases):
        cases.extend(make(n, r))
    return cases


def check_communicates(ck, n, r, run, label):
    """``run()`` executes a graph (tf.function or Session) holding an allreduce of a
    constant. Every execution must communicate: TensorFlow must not constant-fold
    the collective into the graph (the ops have to be stateful). Rank 0 starts the
    second execution late; the other ranks must wait for it."""
    import time
    ck.close("%s: first run" % label, run(), np.array([n], np.float32))
    if r == 0:
        time.sleep(0.6)
    t0 = time.time()
    out = run()
    waited = time.time() - t0
    ck.close("%s: second run" % label, out, np.array([n], np.float32))
    ck.expect(r == 0 or waited > 0.3, "%s: second run waits for rank 0" % label,
              "returned after %.2fs although rank 0 started 0.6s late: the collective did "
              "not communicate (constant-folded by TensorFlow's graph optimizer? the "
              "Horovod* ops must be registered stateful)" % waited)


def eager_subset(cases, every=3):
    """Every case, except that only each ``every``-th case of the dtype x shape x op
    sweeps is kept (the sweeps run in full in tf.function and graph mode; an eager
    collective costs a round trip, the kernels are the same)."""
    kept, i = [], 0
    for c in cases:
        if c.matrix:
            i += 1
            if i % every:
                continue
        kept.append(c)
    return kept


def run_cases(checker, cases, mode, session=None):
    """Runs cases eagerly ("eager"), in one tf.function ("function"), or in the
    default TF1 graph with ``session`` ("graph"); checks every result."""
    if mode == "eager":
        results = [c.build() for c in cases]
    elif mode == "function":
        fn = tf.function(lambda: [c.build() for c in cases], autograph=False)
        results = fn()
    elif mode == "graph":
        results = session.run([c.build() for c in cases])
    else:
        raise ValueError(mode)
    for case, result in zip(cases, results):
        checker.close("[%s] %s" % (mode, case.label), result, case.expected, case.rtol,
                      case.atol)

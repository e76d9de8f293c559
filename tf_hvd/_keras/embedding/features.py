"""A DistributedEmbedding call's inputs: each feature's ids, flat, and how its rows
turn into the feature's output (one id a sample, k ids a sample, ragged or sparse,
weighted or not, reduced with the table's combiner).

    feature = parse_feature(ids, None)                 # ids: [batch, k]
    output = feature.combine(rows, "mean", "float32")  # rows: [batch * k, dim]
    flatten_shapes({"a": (8, 2), "b": (8,)}, 2)        # [(8, 2), (8,)]
"""

import numpy as np
import tensorflow as tf


class Feature(object):
    """One feature's ids, flat, and how to turn their rows into its output."""

    def __init__(self, ids, kind, batch=None, segments=None, weights=None, shape=None):
        self.ids = ids
        self.kind = kind            # "one", "dense", "segments"
        self.batch = batch
        self.segments = segments
        self.weights = weights
        self.shape = shape

    def combine(self, rows, combiner, dtype):
        rows = tf.cast(rows, dtype)
        if self.kind == "one":
            return rows
        if self.kind == "dense":
            dim = tf.shape(rows)[-1]
            rows = tf.reshape(rows, tf.concat([self.shape, [dim]], 0))
            if self.weights is None:
                total = tf.reduce_sum(rows, axis=-2)
                if combiner == "sum":
                    return total
                k = tf.cast(self.shape[-1], dtype)
                return total / (k if combiner == "mean" else tf.sqrt(k))
            w = tf.cast(self.weights, dtype)
            total = tf.reduce_sum(rows * w[..., None], axis=-2)
            return _normalize(total, w, combiner, axis=-1)
        w = (tf.ones_like(self.segments, dtype=dtype) if self.weights is None
             else tf.cast(self.weights, dtype))
        total = tf.math.unsorted_segment_sum(rows * w[:, None], self.segments, self.batch)
        if combiner == "sum":
            return total
        if combiner == "mean":
            denom = tf.math.unsorted_segment_sum(w, self.segments, self.batch)
        else:
            denom = tf.sqrt(tf.math.unsorted_segment_sum(w * w, self.segments, self.batch))
        return tf.math.divide_no_nan(total, denom[:, None])


def _normalize(total, w, combiner, axis):
    if combiner == "sum":
        return total
    if combiner == "mean":
        return tf.math.divide_no_nan(total, tf.reduce_sum(w, axis=axis)[..., None])
    return tf.math.divide_no_nan(total, tf.sqrt(tf.reduce_sum(w * w, axis=axis))[..., None])


def parse_feature(x, w):
    """The Feature of input ``x`` (a tensor, tf.RaggedTensor or tf.SparseTensor) with
    weights ``w`` (None, or the same structure)."""
    if isinstance(x, tf.RaggedTensor):
        ids = x.flat_values
        weights = None if w is None else (w.flat_values if isinstance(w, tf.RaggedTensor)
                                          else tf.reshape(w, [-1]))
        return Feature(ids, "segments", batch=x.nrows(out_type=tf.int32),
                       segments=tf.cast(x.value_rowids(), tf.int32), weights=weights)
    if isinstance(x, tf.SparseTensor):
        weights = None if w is None else (w.values if isinstance(w, tf.SparseTensor)
                                          else tf.reshape(w, [-1]))
        return Feature(x.values, "segments", batch=tf.cast(x.dense_shape[0], tf.int32),
                       segments=tf.cast(x.indices[:, 0], tf.int32), weights=weights)
    x = tf.convert_to_tensor(x)
    if x.shape.rank == 1:
        return Feature(x, "one")
    if x.shape.rank == 2 and x.shape[-1] == 1 and w is None:
        return Feature(tf.reshape(x, [-1]), "one")
    return Feature(tf.reshape(x, [-1]), "dense", weights=w, shape=tf.shape(x))


def flatten_shapes(input_shape, count):
    """The flat list of per-feature shapes in ``input_shape`` (a shape, or a
    structure of them)."""
    def is_shape(s):
        return isinstance(s, (tuple, list)) and all(
            d is None or isinstance(d, (int, np.integer)) for d in s)
    if is_shape(input_shape) and count == 1:
        return [tuple(input_shape)]
    out = []

    def walk(s):
        if is_shape(s):
            out.append(tuple(s))
        elif isinstance(s, dict):
            for k in sorted(s):
                walk(s[k])
        else:
            for v in s:
                walk(v)
    walk(input_shape)
    return out

"""Compression.bf16 in one process: what it sends (the timeline's record of the collective
says bfloat16 and half the bytes), what comes back (the input's dtype), and its refusal
of integer tensors naming the tensor."""

import json

import numpy as np
import pytest
import tensorflow as tf

from one_process import initialized  # noqa: F401 (hvd.init() once, autouse)

import tf_hvd as hvd
from tf_hvd.compression import CompressionError


@pytest.mark.parametrize("dtype,sent", [(tf.float32, tf.bfloat16), (tf.float64, tf.bfloat16),
                                        (tf.float16, tf.float16), (tf.bfloat16, tf.bfloat16)])
def test_bf16_compress_and_decompress(dtype, sent):
    x = tf.constant([1.5, -2.25, 3.0], dtype)
    c, ctx = hvd.Compression.bf16.compress(x)
    assert c.dtype == sent
    back = hvd.Compression.bf16.decompress(c, ctx)
    assert back.dtype == dtype
    np.testing.assert_array_equal(back.numpy(), x.numpy())  # exact in bfloat16
    assert issubclass(hvd.Compression.bf16, hvd.Compressor)


def test_bf16_rounds_to_eight_mantissa_bits():
    x = tf.constant([1.0 + 2.0 ** -9, 1.0 + 3 * 2.0 ** -8, 3.0e38], tf.float32)
    out = hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.bf16).numpy()
    assert out.dtype == np.float32
    # round to nearest even at 8 bits; float32's range kept (float16 would overflow)
    np.testing.assert_array_equal(out[:2], np.array([1.0, 1.0 + 4 * 2.0 ** -8], np.float32))
    assert np.isfinite(out[2]) and abs(out[2] / 3.0e38 - 1) < 2.0 ** -8


@pytest.mark.parametrize("call,label", [
    (lambda: hvd.allreduce(tf.constant([1, 2]), compression=hvd.Compression.bf16,
                           name="counts"), "tensor 'counts'"),
    (lambda: hvd.allreduce(tf.constant([[1, 2]], tf.int64), compression=hvd.Compression.bf16),
     "an unnamed tensor of shape [1, 2]"),
    (lambda: hvd.grouped_allreduce([tf.constant([1.0]), tf.constant([True])],
                                   compression=hvd.Compression.bf16, name="grads"),
     "tensor 'grads_1'"),
    (lambda: hvd.reducescatter(tf.constant([[1], [2]], tf.uint8),
                               compression=hvd.Compression.bf16, name="rows"), "tensor 'rows'"),
])
def test_bf16_refuses_integer_tensors_naming_them(call, label):
    with pytest.raises(CompressionError) as e:
        call()
    dtype = str(e.value).split("this tensor is ")[1].split(" ")[0]
    assert str(e.value) == (
        "%s: Compression.bf16 sends floating-point tensors as bfloat16, and this tensor is %s "
        "(its values would change); reduce it with Compression.none" % (label, dtype))
    assert isinstance(e.value, TypeError)


def test_bf16_in_a_graph_names_the_graph_tensor():
    @tf.function
    def f(x):
        return hvd.allreduce(x, compression=hvd.Compression.bf16)
    # autograph wraps it (StagingError) and keeps the message
    with pytest.raises(Exception) as e:
        f(tf.constant([1, 2]))
    assert "CompressionError: tensor 'x:0': Compression.bf16 sends floating-point" in str(
        e.value), str(e.value)


def _collective_events(path):
    with open(path) as f:
        events = json.load(f)
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M"
             and e.get("name") == "process_name"}
    return {(names.get(e["pid"]), e["name"]): e["args"] for e in events
            if e.get("ph") == "B" and "dtype" in e.get("args", {})}


def test_the_timeline_shows_bfloat16_on_the_wire(tmp_path):
    path = str(tmp_path / "timeline.json")
    x = tf.ones([1000], tf.float32)
    hvd.start_timeline(path)
    try:
        hvd.allreduce(x, name="plain")
        hvd.allreduce(x, name="squeezed", compression=hvd.Compression.bf16)
        hvd.grouped_allreduce([x, tf.ones([10], tf.float64)], name="group",
                              compression=hvd.Compression.bf16)
        hvd.reducescatter(tf.ones([4, 250]), name="scattered", compression=hvd.Compression.bf16)
    finally:
        hvd.stop_timeline()
    got = _collective_events(path)
    assert got[("plain", "ALLREDUCE")] == {"dtype": "float32", "bytes": 4000}
    assert got[("squeezed", "ALLREDUCE")] == {"dtype": "bfloat16", "bytes": 2000}
    assert got[("group_0", "ALLREDUCE")] == {"dtype": "bfloat16", "bytes": 2000}
    assert got[("group_1", "ALLREDUCE")] == {"dtype": "bfloat16", "bytes": 20}
    assert got[("scattered", "REDUCESCATTER")] == {"dtype": "bfloat16", "bytes": 2000}

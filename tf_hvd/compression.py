"""Gradient compression applied around a collective (what travels on the wire).

A compressor turns a tensor into the tensor that is sent plus a context, and
turns the received tensor back using that context::

    compressed, ctx = Compression.fp16.compress(tensor)
    reduced = hvd.allreduce(compressed)   # done by hvd.allreduce(..., compression=)
    result = Compression.fp16.decompress(reduced, ctx)
"""

import tensorflow as tf


class Compressor(object):
    """Interface: compress(tensor) -> (tensor, ctx); decompress(tensor, ctx) -> tensor."""

    @staticmethod
    def compress(tensor):
        """Returns the tensor to send and the context decompress needs."""
        raise NotImplementedError("Compressor.compress must be overridden")

    @staticmethod
    def decompress(tensor, ctx):
        """Returns the received tensor restored with the context from compress."""
        raise NotImplementedError("Compressor.decompress must be overridden")


class NoneCompressor(Compressor):
    """Sends tensors unchanged."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    """Sends float32/float64 tensors as float16 and casts the result back.

    Other dtypes (integers, float16, bfloat16) are sent unchanged.
    """

    _WIDE_FLOATS = (tf.float32, tf.float64)

    @staticmethod
    def compress(tensor):
        tensor = tf.convert_to_tensor(tensor)
        if tensor.dtype in FP16Compressor._WIDE_FLOATS:
            return tf.cast(tensor, tf.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        if ctx is None:
            return tensor
        return tf.cast(tensor, ctx)


class Compression(object):
    """The available compressors: ``Compression.none`` and ``Compression.fp16``."""

    none = NoneCompressor
    fp16 = FP16Compressor

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


class _NarrowFloatCompressor(Compressor):
    """Sends float32/float64 tensors as ``_WIRE`` and casts the result back; what it does
    with other dtypes is ``_other``'s."""

    _WIDE_FLOATS = (tf.float32, tf.float64)
    _WIRE = None

    @classmethod
    def compress(cls, tensor):
        tensor = tf.convert_to_tensor(tensor)
        if tensor.dtype in cls._WIDE_FLOATS:
            return tf.cast(tensor, cls._WIRE), tensor.dtype
        return cls._other(tensor), None

    @staticmethod
    def _other(tensor):
        return tensor

    @staticmethod
    def decompress(tensor, ctx):
        if ctx is None:
            return tensor
        return tf.cast(tensor, ctx)


class FP16Compressor(_NarrowFloatCompressor):
    """Sends float32/float64 tensors as float16 and casts the result back.

    Other dtypes (integers, float16, bfloat16) are sent unchanged.
    """

    _WIRE = tf.float16


class CompressionError(TypeError):
    """A compressor cannot send this tensor (its message says why); the collectives add
    the tensor's name."""


class BF16Compressor(_NarrowFloatCompressor):
    """Sends float32/float64 tensors as bfloat16 and casts the result back.

    bfloat16 keeps float32's exponent range with an 8-bit mantissa, so gradients that
    would overflow or underflow float16 travel without loss scaling; half the bytes of
    float32 cross the wire. float16 and bfloat16 tensors are sent unchanged; integer and
    bool tensors are refused (CompressionError), since rounding them to bfloat16 would
    change their values. A tf_hvd addition: Horovod has fp16 only.
    """

    _WIRE = tf.bfloat16

    @staticmethod
    def _other(tensor):
        if tensor.dtype.is_floating:
            return tensor
        raise CompressionError(
            "Compression.bf16 sends floating-point tensors as bfloat16, and this tensor is "
            "%s (its values would change); reduce it with Compression.none"
            % tensor.dtype.name)


class Compression(object):
    """The available compressors: ``Compression.none``, ``Compression.fp16`` and
    ``Compression.bf16`` (a tf_hvd addition).

    Example:
        >>> hvd.Compression.bf16.compress(tf.constant([1.0, 2.5]))[0].dtype
        tf.bfloat16
    """

    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor

"""How a collective is named: its graph op name and the tensor name ranks match on.

The rule (tf_hvd.ops' docstring states it for users): a given ``name`` is the op's name
in a graph and the tensor name eagerly; without one, a graph op is
``<OpType>_<input tensor name>`` and an eager call is ``<kind>.noname``. Also here:
whether an XLA-compiled function is being traced, since only some ops have XLA
kernels and the others must stop at trace time::

    op_names("allreduce", "HorovodAllreduce", None)   # eagerly: (None, "allreduce.noname")
    normalize_name("dense/kernel:0")                   # "dense_kernel_0"
"""

import re

import tensorflow as tf

_NOT_NAME_CHARS = re.compile(r"[^A-Za-z0-9_]")


def normalize_name(name):
    """Turns a tensor name like ``dense/kernel:0`` into ``dense_kernel_0``."""
    return _NOT_NAME_CHARS.sub("_", name)


def noname(kind):
    """The tensor name of an unnamed eager collective of ``kind``.

    It does not depend on how many collectives ran before, so ranks stay in
    step and the response cache hits: ``noname("allreduce") == "allreduce.noname"``.
    """
    return "%s.noname" % kind


def _tensor_label(tensor):
    try:
        return normalize_name(tensor.name)
    except (AttributeError, ValueError):
        # An EagerTensor captured into a graph has no graph name.
        return "tensor"


def op_names(kind, op_type, name, tensor=None):
    """Returns (op name for the graph, tensor_name attr) following the naming rule."""
    if tf.executing_eagerly():
        if name is None:
            return None, noname(kind)
        return None, str(name)
    if name is None:
        if tensor is None:
            return op_type, ""
        return "%s_%s" % (op_type, _tensor_label(tensor)), ""
    return str(name), ""


def in_xla_function():
    """True while tracing a function that XLA compiles (tf.function(jit_compile=True),
    Keras' jit_compile)."""
    if tf.executing_eagerly():
        return False
    try:
        from tensorflow.python.ops import control_flow_util
    except ImportError:  # pragma: no cover - private module moved
        return False
    return control_flow_util.GraphOrParentsInXlaContext(
        tf.compat.v1.get_default_graph())


# The ops that have XLA kernels (cc/tensorflow/xla/xla_kernels.cc).
XLA_OPS = ("HorovodAllreduce", "HorovodGroupedAllreduce", "HorovodAllgather",
           "HorovodBroadcast")


def check_not_xla(op_type):
    """Ops without an XLA kernel stop at trace time, naming the op, instead of
    failing later in XLA's compiler with a long list of unsupported nodes."""
    if in_xla_function():
        raise NotImplementedError(
            "%s has no XLA kernel and cannot run inside an XLA-compiled function "
            "(tf.function(jit_compile=True), Keras jit_compile=True); inside XLA "
            "tf_hvd supports %s. Call it outside the compiled function." % (
                op_type, ", ".join(XLA_OPS)))


def sub_name(name, suffix):
    """The name of the ``suffix``-th member of a named group (None stays None)."""
    return None if name is None else "%s_%s" % (name, suffix)

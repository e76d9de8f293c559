"""The gradients of the collectives, registered with TensorFlow on import.

tf_hvd.ops imports this module, so every path to a collective (tf_hvd.ops and any of
its submodules) has them registered. The comment below gives each rule.
"""

import tensorflow as tf

from tf_hvd.ops.naming import normalize_name
from tf_hvd.ops.raw import raw_allgather, raw_allreduce, raw_alltoall, raw_grouped_allreduce
from tf_hvd.process_sets import set_rank_size
from tf_hvd.reduce_ops import Adasum, Average, Max, Min, Sum
from tf_hvd.topology import rank

# Gradients: Horovod 0.28's definitions, so that a ported model gets Horovod's
# numbers (g is the incoming gradient on each rank, n = size()):
#   allreduce (Sum, Average, Adasum), grouped allreduce:
#                  the same allreduce of g, with the same op and scale factors
#   allgather:     allreduce(g, Average), then this rank's rows
#   broadcast:     allreduce(g, Average) on the root, zeros elsewhere
#   alltoall:      alltoall(g) back with the received splits
#   reducescatter: allgather(g), times n for Sum (and, a tf_hvd addition,
#                  times prescale * postscale when they are not 1)
# Min, Max and Product are where tf_hvd differs on purpose: Horovod
# differentiates them as allreduce(g, same op), which is not a derivative;
# here they get the derivative of the sum of every rank's loss (see
# _extremum_or_product_grad).
#
# In a graph, the collectives of a gradient are named after the forward op
# (``<forward op name>_grad[_<part>]``), not after their input tensors: the
# gradient graph TensorFlow builds upstream may differ between ranks (e.g. the
# gradient of a broadcasting multiply depends on static shapes that differ per
# rank), while the forward op's name is the same on every rank. Eagerly the
# usual per-kind counters apply.


def _grad_name(op, part=None):
    if tf.executing_eagerly():
        return None
    # Under tf.GradientTape ``op`` is a stand-in without a name; its outputs
    # are the forward op's graph tensors.
    forward = op if isinstance(op, tf.Operation) else None
    if forward is None:
        for t in getattr(op, "outputs", ()):
            forward = getattr(t, "op", None)
            if isinstance(forward, tf.Operation):
                break
            forward = None
    if forward is None:
        return None
    base = "%s_grad" % normalize_name(forward.name)
    return base if part is None else "%s_%s" % (base, part)


def _set_id(op):
    try:
        return int(op.get_attr("process_set_id"))
    except ValueError:
        return 0


def _attrs(op):
    return dict(op=op.get_attr("reduce_op"), prescale_factor=op.get_attr("prescale_factor"),
                postscale_factor=op.get_attr("postscale_factor"),
                ignore_name_scope=op.get_attr("ignore_name_scope"),
                process_set_id=_set_id(op))


def _extremum_or_product_grad(fwd, x, grad, attrs, part):
    """Gradient of y = post * R_q(pre * x_q) for R in Min, Max, Product."""
    reduce_op = attrs["op"]
    pre, post = attrs["prescale_factor"], attrs["postscale_factor"]
    ign = attrs["ignore_name_scope"]
    ps = attrs["process_set_id"]

    def name(what):
        return _grad_name(fwd, what if part is None else "%s_%s" % (part, what))
    summed = raw_allreduce(grad, op=Sum, ignore_name_scope=ign, name=name("sum"), process_set_id=ps)
    if reduce_op in (Min, Max):
        scaled = x * tf.cast(pre, x.dtype)
        extreme = raw_allreduce(scaled, op=reduce_op, ignore_name_scope=ign, name=name("extreme"),
                                process_set_id=ps)
        hit = tf.cast(tf.equal(scaled, extreme), grad.dtype)
        # Ties share the gradient equally, as tf.reduce_max does.
        ties = raw_allreduce(hit, op=Sum, ignore_name_scope=ign, name=name("ties"),
                             process_set_id=ps)
        return summed * hit / tf.maximum(ties, tf.ones_like(ties)) * tf.cast(pre * post,
                                                                             grad.dtype)
    # Product: dy/dx_q = post * pre**n * prod_{p != q} x_p, from every rank's x.
    everyone = raw_allgather(tf.expand_dims(x, 0), ignore_name_scope=ign, name=name("inputs"),
                             process_set_id=ps)
    me, members = set_rank_size(ps)
    others = (tf.math.cumprod(everyone, axis=0, exclusive=True) *
              tf.math.cumprod(everyone, axis=0, exclusive=True, reverse=True))[me]
    return summed * others * tf.cast(post * pre ** members, grad.dtype)


@tf.RegisterGradient("HorovodAllreduce")
def _allreduce_grad(op, grad):
    attrs = _attrs(op)
    if attrs["op"] in (Sum, Average, Adasum):
        return raw_allreduce(grad, name=_grad_name(op), **attrs)
    return _extremum_or_product_grad(op, op.inputs[0], grad, attrs, None)


@tf.RegisterGradient("HorovodGroupedAllreduce")
def _grouped_allreduce_grad(op, *grads):
    attrs = _attrs(op)
    grads = [tf.zeros_like(y) if g is None else g for g, y in zip(grads, op.outputs)]
    if attrs["op"] in (Sum, Average, Adasum):
        return raw_grouped_allreduce(grads, name=_grad_name(op), **attrs)
    return [_extremum_or_product_grad(op, x, g, attrs, str(i))
            for i, (x, g) in enumerate(zip(op.inputs, grads))]


@tf.RegisterGradient("HorovodAllgather")
def _allgather_grad(op, grad):
    ign = op.get_attr("ignore_name_scope")
    ps = _set_id(op)
    averaged = raw_allreduce(grad, op=Average, ignore_name_scope=ign, name=_grad_name(op),
                             process_set_id=ps)
    rows = tf.shape(op.inputs[0], out_type=tf.int64)[:1]
    every_rows = raw_allgather(rows, ignore_name_scope=ign, name=_grad_name(op, "rows"),
                               process_set_id=ps)
    me = set_rank_size(ps)[0]
    offset = tf.reduce_sum(every_rows[:me])
    return averaged[offset:offset + every_rows[me]]


@tf.RegisterGradient("HorovodBroadcast")
def _broadcast_grad(op, grad):
    averaged = raw_allreduce(grad, op=Average,
                             ignore_name_scope=op.get_attr("ignore_name_scope"),
                             name=_grad_name(op), process_set_id=_set_id(op))
    if rank() != op.get_attr("root_rank"):
        # Multiplied by zero as in Horovod; consuming the allreduce also keeps
        # it from being pruned from a graph on non-root ranks, so every rank
        # takes part.
        return averaged * tf.zeros([], averaged.dtype)
    return averaged


@tf.RegisterGradient("HorovodAlltoall")
def _alltoall_grad(op, grad, unused_grad_received_splits):
    if grad is None:
        grad = tf.zeros_like(op.outputs[0])
    back, _ = raw_alltoall(grad, splits=op.outputs[1],
                           ignore_name_scope=op.get_attr("ignore_name_scope"),
                           name=_grad_name(op), process_set_id=_set_id(op))
    return [back, None]


@tf.RegisterGradient("HorovodReducescatter")
def _reducescatter_grad(op, grad):
    attrs = _attrs(op)
    factor = attrs["prescale_factor"] * attrs["postscale_factor"]
    if attrs["op"] == Sum:
        factor *= set_rank_size(attrs["process_set_id"])[1]
    if factor != 1.0:
        grad = grad * tf.cast(factor, grad.dtype)
    return raw_allgather(grad, ignore_name_scope=attrs["ignore_name_scope"], name=_grad_name(op),
                         process_set_id=attrs["process_set_id"])


for _op_type in ("HorovodJoin", "HorovodBarrier", "HorovodSize", "HorovodRank",
                 "HorovodLocalSize", "HorovodLocalRank"):
    tf.no_gradient(_op_type)
del _op_type

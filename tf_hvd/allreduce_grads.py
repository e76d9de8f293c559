"""Reduce a list of gradients over all ranks.

This is the one function every training wrapper (the TF1 DistributedOptimizer,
DistributedGradientTape, the Keras DistributedOptimizer and the local gradient
aggregation helpers) uses to turn local gradients into global ones:

* dense tensors go through ``allreduce`` (or ``grouped_allreduce`` when groups
  are asked for), with the gradient compression of the caller;
* ``tf.IndexedSlices`` (embedding gradients) are reduced by gathering the values
  and the indices of every rank, then scaling the values (Average divides by the
  number of ranks), unless ``sparse_as_dense`` turns them into dense tensors;
* ``None`` gradients pass through untouched;
* with one process the gradients come back unchanged (no op is created).
"""

import collections
import re

import tensorflow as tf

from tf_hvd import ops, topology
from tf_hvd.compression import Compression
from tf_hvd.reduce_ops import Adasum, Average

_NOT_NAME_CHARS = re.compile(r"[^A-Za-z0-9_]")


def _set_size(process_set):
    if process_set is None or process_set.process_set_id == 0:
        return topology.size()
    return process_set.size()


def _is_sparse(grad):
    return isinstance(grad, tf.IndexedSlices)


def scale_factors(op, gradient_predivide_factor):
    """Split the averaging into a factor applied before and after the sum."""
    if gradient_predivide_factor == 1.0:
        return op, 1.0, 1.0
    if op != Average:
        raise ValueError(
            "gradient_predivide_factor is only supported with op=Average "
            "(got op=%r)" % (op,))
    # The kernel divides by size for Average; the factors move part of that
    # division before the sum: sum(g / f) * f / size == mean(g).
    return Average, 1.0 / gradient_predivide_factor, gradient_predivide_factor


def _group_layout(grads, variables, groups):
    """Return a tuple of index tuples: gradients reduced together.

    Only the positions of dense, not-None gradients appear in the layout.
    ``groups`` is an int (number of groups, contiguous near-equal chunks) or a
    list of lists of variables (variables in one inner list form one group;
    every other gradient is reduced on its own).
    """
    dense = [i for i, g in enumerate(grads) if g is not None and not _is_sparse(g)]
    if not groups:
        return tuple((i,) for i in dense)
    if isinstance(groups, int):
        if groups < 0:
            raise ValueError("groups must be a non-negative int or a list of "
                             "lists of variables, got %r" % (groups,))
        n = min(groups, len(dense)) or 1
        base, extra = divmod(len(dense), n)
        layout, start = [], 0
        for k in range(n):
            end = start + base + (1 if k < extra else 0)
            if end > start:
                layout.append(tuple(dense[start:end]))
            start = end
        return tuple(layout)
    if variables is None:
        raise ValueError("groups given as lists of variables needs the "
                         "variables of the gradients")
    group_of = {}
    for k, members in enumerate(groups):
        for v in members:
            group_of[id(v)] = k
    by_group = {}
    layout = []
    for i in dense:
        k = group_of.get(id(variables[i]))
        if k is None:
            layout.append((i,))
        elif k in by_group:
            by_group[k].append(i)
        else:
            by_group[k] = [i]
            layout.append(by_group[k])
    return tuple(tuple(g) for g in layout)


def _labels(variables, count):
    """Short, rank-independent labels of the gradients' variables."""
    if variables is None or len(variables) != count:
        return ("",) * count
    labels = []
    for v in variables:
        name = getattr(v, "name", "") or ""
        if not isinstance(name, str):
            name = ""
        name = name.split(":")[0].rsplit("/", 1)[-1]
        labels.append(_NOT_NAME_CHARS.sub("_", name))
    return tuple(labels)


def _graph_name(kind, index, label):
    """The name of one collective: ``grad_3_kernel`` (graph mode) or None
    eagerly (then the eager auto-naming applies; not reached: eager calls
    run inside a tf.function)."""
    if tf.executing_eagerly():
        return None
    return "%s_%d_%s" % (kind, index, label) if label else "%s_%d" % (kind, index)


def _xla_layout(grads):
    """Inside XLA every collective is a custom call that blocks until it is done,
    so reducing gradients one by one would run them one after the other, unfused.
    Without explicit groups, XLA-compiled steps reduce all dense gradients of one
    dtype as one grouped allreduce instead (the core fuses it)."""
    by_dtype = collections.OrderedDict()
    for i, g in enumerate(grads):
        if g is not None and not _is_sparse(g):
            by_dtype.setdefault(g.dtype, []).append(i)
    return tuple(tuple(idxs) for idxs in by_dtype.values())


def _check_groups(groups):
    if groups is None or isinstance(groups, int):
        return
    if not isinstance(groups, (list, tuple)) or not all(
            isinstance(g, (list, tuple)) for g in groups):
        raise ValueError("groups must be a non-negative int or a list of lists "
                         "of variables, got %r" % (groups,))


_FN_CACHE = collections.OrderedDict()
_FN_CACHE_SIZE = 64


def _cache_key(args):
    name, device_dense, device_sparse, compression, sparse_as_dense, op, \
        gradient_predivide_factor, groups, process_set = args
    if isinstance(groups, (list, tuple)):
        groups = tuple(tuple(id(v) for v in g) for g in groups)
    return (name, device_dense, device_sparse, compression, bool(sparse_as_dense),
            op, float(gradient_predivide_factor), groups, id(process_set))


def make_allreduce_grads_fn(name, device_dense='', device_sparse='',
                            compression=Compression.none, sparse_as_dense=False,
                            op=Average, gradient_predivide_factor=1.0,
                            groups=None, process_set=None):
    """Build ``allreduce_grads(grads, variables=None) -> list of gradients``.

    The returned function keeps the positions of ``grads`` (None stays None).
    Executed eagerly, the reductions of one call run inside one tf.function so
    that all gradients are submitted together (and fused) instead of one
    blocking collective after the other. Functions are cached by their
    arguments, so wrapping a new tape every eager step does not retrace.
    (Groups are matched by variable identity, so caching by ``id`` is exact.)
    ``process_set``: reduce over that hvd.ProcessSet's ranks only.
    """
    args = (name, device_dense, device_sparse, compression, sparse_as_dense, op,
            gradient_predivide_factor, groups, process_set)
    _check_groups(groups)
    key = _cache_key(args)
    fn = _FN_CACHE.get(key)
    if fn is None:
        fn = _build_allreduce_grads_fn(*args)
        _FN_CACHE[key] = fn
        while len(_FN_CACHE) > _FN_CACHE_SIZE:
            _FN_CACHE.popitem(last=False)
    else:
        _FN_CACHE.move_to_end(key)
    return fn


def _build_allreduce_grads_fn(name, device_dense, device_sparse, compression,
                              sparse_as_dense, op, gradient_predivide_factor,
                              groups, process_set=None):
    _check_groups(groups)
    op, prescale_factor, postscale_factor = scale_factors(
        op, gradient_predivide_factor)
    scope = (name or "DistributedGradients") + "_Allreduce"

    def reduce_all(grads, layout, labels):
        # Collectives are named by position (and the variable's short name),
        # not by the gradient tensors' names: those contain Keras' auto-numbered
        # layer names, which differ between ranks as soon as one rank builds an
        # extra model (an evaluation copy, say), and would then never match.
        with tf.name_scope(scope):
            out = list(grads)
            for idxs in layout:
                if len(idxs) == 1:
                    i = idxs[0]
                    out[i] = ops.allreduce(
                        grads[i], device_dense=device_dense,
                        device_sparse=device_sparse, compression=compression,
                        op=op, prescale_factor=prescale_factor,
                        postscale_factor=postscale_factor,
                        name=_graph_name("grad", i, labels[i]), process_set=process_set)
                else:
                    reduced = ops.grouped_allreduce(
                        [grads[i] for i in idxs], device_dense=device_dense,
                        device_sparse=device_sparse, compression=compression,
                        op=op, prescale_factor=prescale_factor,
                        postscale_factor=postscale_factor,
                        name=_graph_name("group", idxs[0], ""), process_set=process_set)
                    for i, r in zip(idxs, reduced):
                        out[i] = r
            for i, g in enumerate(grads):
                if _is_sparse(g):
                    # Two allgathers (values, indices); Average divides by
                    # size, which is what the predivide split amounts to
                    # (allreduce of IndexedSlices takes no scale factors).
                    out[i] = ops.allreduce(
                        g, device_dense=device_dense,
                        device_sparse=device_sparse, op=op,
                        name=_graph_name("sparse_grad", i, labels[i]),
                        process_set=process_set)
            return out

    eager_fns = {}

    def allreduce_grads(grads, variables=None):
        grads = list(grads)
        if sparse_as_dense:
            grads = [tf.convert_to_tensor(g) if _is_sparse(g) else g
                     for g in grads]
        if _set_size(process_set) == 1:
            return grads
        variables = list(variables) if variables is not None else None
        if not groups and ops.in_xla_function():
            layout = _xla_layout(grads)
        else:
            layout = _group_layout(grads, variables, groups)
        labels = _labels(variables, len(grads))
        if not tf.executing_eagerly():
            return reduce_all(grads, layout, labels)
        key = (layout, labels)
        fn = eager_fns.get(key)
        if fn is None:
            fn = tf.function(lambda g: reduce_all(g, layout, labels),
                             autograph=False, reduce_retracing=True)
            eager_fns[key] = fn
        return list(fn(grads))

    return allreduce_grads


# Horovod's private name, kept for users who reached for it.
_make_allreduce_grads_fn = make_allreduce_grads_fn


def groups_from_num_groups(num_groups, groups):
    """Horovod's deprecated num_groups argument folded into groups."""
    if num_groups and groups is None:
        return num_groups
    if num_groups and groups is not None:
        raise ValueError("pass either num_groups or groups, not both")
    return groups

"""DistributedGradientTape: a tf.GradientTape whose gradient() is allreduced."""

import tensorflow as tf

from tf_hvd import topology
from tf_hvd.compression import Compression
from tf_hvd.reduce_ops import Average
from tf_hvd.reduction_params import ReductionParams
from tf_hvd.sharded_rows import is_sharded_rows


# Set on every gradient a DistributedGradientTape has averaged, so that a sharded
# DistributedOptimizer given them does not reduce them a second time.
REDUCED_MARK = "_hvd_reduced"


def _mark_reduced(grads, is_local):
    for g, local in zip(grads, is_local):
        if g is None or local:
            continue
        try:
            setattr(g.values if isinstance(g, tf.IndexedSlices) else g, REDUCED_MARK, True)
            if isinstance(g, tf.IndexedSlices):
                setattr(g, REDUCED_MARK, True)
        except AttributeError:  # pragma: no cover - a tensor type without __dict__
            pass


def variable_key(var):
    """A hashable key for a variable (tf.Variable, Keras variables; else its id)."""
    ref = getattr(var, "ref", None)
    return ref() if callable(ref) else id(var)


def reduce_skipping_local(allreduce_grads, grads, sources, is_local, scale_local):
    """Allreduces the gradients of shared sources; those of local ones stay
    as computed here, divided by ``hvd.size()`` when ``scale_local`` (as
    Horovod's scale_local_gradients). None stays None."""
    grads = list(grads)
    shared = [i for i, local in enumerate(is_local) if not local]
    out = list(grads)
    reduced = allreduce_grads([grads[i] for i in shared], [sources[i] for i in shared])
    for i, r in zip(shared, reduced):
        out[i] = r
    n = topology.size()
    if scale_local and n > 1:
        for i, local in enumerate(is_local):
            g = out[i]
            # A sharded table's gradient is averaged by its layer already.
            if not local or g is None or is_sharded_rows(sources[i]):
                continue
            if isinstance(g, tf.IndexedSlices):
                out[i] = tf.IndexedSlices(g.values / tf.cast(n, g.values.dtype), g.indices,
                                          g.dense_shape)
            else:
                out[i] = g / tf.cast(n, g.dtype)
    return out


class _DistributedTapeMixin(object):
    """Wraps a recorded tape; ``gradient`` reduces, everything else delegates.

    The wrapper shares the recorded operations of the given tape (it holds the
    tape itself), so it can wrap a tape after its ``with`` block, or be used as
    the context manager itself. A persistent tape can compute gradients (each
    allreduced) as many times as the wrapped tape allows.
    """

    def __init__(self, tape, allreduce_grads, process_set=None, scale_local_gradients=True):
        # tf.GradientTape.__init__ is not called on purpose: all recording
        # state lives in the wrapped tape.
        self.__dict__["_hvd_tape"] = tape
        self.__dict__["_hvd_allreduce_grads"] = allreduce_grads
        self.__dict__["_hvd_local_sources"] = set()
        self.__dict__["process_set"] = process_set
        self.__dict__["scale_local_gradients"] = scale_local_gradients

    def __getattr__(self, name):
        return getattr(self.__dict__["_hvd_tape"], name)

    def __enter__(self):
        self._hvd_tape.__enter__()
        return self

    def __exit__(self, typ, value, traceback):
        return self._hvd_tape.__exit__(typ, value, traceback)

    def watch(self, tensor):
        return self._hvd_tape.watch(tensor)

    def stop_recording(self):
        return self._hvd_tape.stop_recording()

    def reset(self):
        return self._hvd_tape.reset()

    def watched_variables(self):
        return self._hvd_tape.watched_variables()

    def jacobian(self, *args, **kwargs):
        """Not reduced: the wrapped tape's jacobian."""
        return self._hvd_tape.jacobian(*args, **kwargs)

    def batch_jacobian(self, *args, **kwargs):
        """Not reduced: the wrapped tape's batch_jacobian."""
        return self._hvd_tape.batch_jacobian(*args, **kwargs)

    def register_local_source(self, source):
        """Marks ``source`` (a variable) as worker-local: its gradient is not
        allreduced; with ``scale_local_gradients`` (Horovod's default) it is
        divided by ``hvd.size()`` like the averaged ones."""
        self._hvd_local_sources.add(variable_key(source))

    def _is_local(self, source):
        return bool(self._hvd_local_sources) and variable_key(source) in self._hvd_local_sources

    def gradient(self, target, sources, output_gradients=None, use_generic_names=False,
                 unconnected_gradients=tf.UnconnectedGradients.NONE):
        """The wrapped tape's gradients, allreduced over all ranks.

        ``sources`` may be any nested structure; the result has the same
        structure. None gradients stay None. The gradients of local sources
        (``register_local_source``) are not allreduced, and are divided by
        ``hvd.size()`` when ``scale_local_gradients``. ``use_generic_names``
        is Horovod's fourth parameter: the collectives here are always named
        by position (``grad_<i>``), so it changes nothing. The averaged
        gradients carry a mark (``_hvd_reduced``) by which a sharded
        DistributedOptimizer given them slices them instead of reducing them
        again.
        """
        grads = self._hvd_tape.gradient(
            target, sources, output_gradients=output_gradients,
            unconnected_gradients=unconnected_gradients)
        flat_sources = tf.nest.flatten(sources)
        flat_grads = tf.nest.flatten(grads)
        # Sources holding sharded rows (DistributedEmbedding tables) pass through
        # like local ones: their layer sent each row's averaged gradient to its owner.
        is_local = [self._is_local(s) or is_sharded_rows(s) for s in flat_sources]
        out = reduce_skipping_local(self._hvd_allreduce_grads, flat_grads, flat_sources,
                                    is_local, self.scale_local_gradients)
        _mark_reduced(out, is_local)
        return tf.nest.pack_sequence_as(grads, out)

    def get_local_and_global_gradients(self, target, sources, output_gradients=None,
                                       use_generic_names=False):
        """Horovod 0.28's split of :meth:`gradient`: ``(local_gradients,
        global_gradients)``, the gradients of the local sources and of the
        others (allreduced), each a list in the order of ``sources`` (a
        flat list). For instance, to clip the shared part by its global norm::

            local, shared = tape.get_local_and_global_gradients(loss, variables)
            shared, _ = tf.clip_by_global_norm(shared, 1.0)
        """
        sources = list(sources)
        grads = self.gradient(target, sources, output_gradients, use_generic_names)
        local, shared = [], []
        for source, grad in zip(sources, grads):
            (local if self._is_local(source) else shared).append(grad)
        return local, shared


_TAPE_CLASSES = {}


def _distributed_tape_class(tape_cls):
    cls = _TAPE_CLASSES.get(tape_cls)
    if cls is None:
        cls = type(tape_cls.__name__, (_DistributedTapeMixin, tape_cls),
                   {"__module__": __name__})
        _TAPE_CLASSES[tape_cls] = cls
    return cls


def DistributedGradientTape(gradtape, device_dense='', device_sparse='',
                            compression=Compression.none,
                            sparse_as_dense=False, op=Average,
                            gradient_predivide_factor=1.0, num_groups=0,
                            groups=None, process_set=None, scale_local_gradients=True):
    """Wrap a ``tf.GradientTape`` so ``gradient()`` returns allreduced gradients.

    Works eagerly and inside ``tf.function``, with Keras 3 variables, persistent
    tapes and nested structures of sources. The result is an instance of the
    given tape's class.

    Args:
      gradtape: the tape that recorded the forward pass.
      device_dense, device_sparse, compression, sparse_as_dense, op,
      gradient_predivide_factor, num_groups, groups, process_set,
      scale_local_gradients: as for ``DistributedOptimizer`` (Horovod's
        parameters, in Horovod's order).

    Example:

    >>> hvd.init()
    >>> w = tf.Variable([1.0, 2.0])
    >>> with tf.GradientTape() as tape:
    ...     loss = tf.reduce_sum(w * w)
    >>> tape = hvd.DistributedGradientTape(tape)
    >>> [g.numpy().tolist() for g in tape.gradient(loss, [w])]   # averaged over ranks
    [[2.0, 4.0]]
    """
    return _wrap_tape(gradtape, ReductionParams.from_call(locals()))


def _wrap_tape(gradtape, params):
    """The distributed tape for ``gradtape`` reducing with ``params`` (ReductionParams)."""
    if not isinstance(gradtape, tf.GradientTape):
        raise TypeError("DistributedGradientTape needs a tf.GradientTape, got %r"
                        % (type(gradtape),))
    if isinstance(gradtape, _DistributedTapeMixin):
        raise ValueError("the tape is already a DistributedGradientTape")
    allreduce_grads = params.allreduce_grads_fn("DistributedGradientTape")
    return _distributed_tape_class(type(gradtape))(
        gradtape, allreduce_grads, params.process_set, params.scale_local_gradients)


def PartialDistributedGradientTape(gradtape, device_dense='', device_sparse='',
                                   compression=Compression.none,
                                   sparse_as_dense=False, op=Average,
                                   gradient_predivide_factor=1.0, num_groups=0,
                                   groups=None, process_set=None, local_layers=None,
                                   scale_local_gradients=True):
    """A DistributedGradientTape whose gradients of the variables of
    ``local_layers`` (a Keras layer or a list of them) are not allreduced: each
    rank keeps its own, divided by ``hvd.size()`` when ``scale_local_gradients``
    (Horovod's default, so that they are on the scale of the averaged ones)::

        tape = hvd.PartialDistributedGradientTape(tape, local_layers=[embedding])
        grads = tape.gradient(loss, model.trainable_variables)
    """
    tape = _wrap_tape(gradtape, ReductionParams.from_call(locals()))
    if local_layers is None:
        local_layers = []
    elif not isinstance(local_layers, (list, tuple)):
        local_layers = [local_layers]
    for layer in local_layers:
        for var in layer.trainable_weights:
            tape.register_local_source(var)
    return tape

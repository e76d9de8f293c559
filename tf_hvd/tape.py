"""DistributedGradientTape: a tf.GradientTape whose gradient() is allreduced."""

import tensorflow as tf

from tf_hvd.allreduce_grads import groups_from_num_groups, make_allreduce_grads_fn
from tf_hvd.compression import Compression
from tf_hvd.basics import Average


class _DistributedTapeMixin(object):
    """Wraps a recorded tape; ``gradient`` reduces, everything else delegates.

    The wrapper shares the recorded operations of the given tape (it holds the
    tape itself), so it can wrap a tape after its ``with`` block, or be used as
    the context manager itself. A persistent tape can compute gradients (each
    allreduced) as many times as the wrapped tape allows.
    """

    def __init__(self, tape, allreduce_grads):
        # tf.GradientTape.__init__ is not called on purpose: all recording
        # state lives in the wrapped tape.
        self.__dict__["_hvd_tape"] = tape
        self.__dict__["_hvd_allreduce_grads"] = allreduce_grads
        self.__dict__["_hvd_local_sources"] = set()

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
        """Gradients of ``source`` (a variable) are not allreduced."""
        self._hvd_local_sources.add(id(source))

    def gradient(self, target, sources, output_gradients=None,
                 unconnected_gradients=tf.UnconnectedGradients.NONE):
        """The wrapped tape's gradients, allreduced over all ranks.

        ``sources`` may be any nested structure; the result has the same
        structure. None gradients stay None.
        """
        grads = self._hvd_tape.gradient(
            target, sources, output_gradients=output_gradients,
            unconnected_gradients=unconnected_gradients)
        flat_sources = tf.nest.flatten(sources)
        flat_grads = tf.nest.flatten(grads)
        local = self._hvd_local_sources
        if local:
            shared = [i for i, s in enumerate(flat_sources) if id(s) not in local]
        else:
            shared = list(range(len(flat_sources)))
        reduced = self._hvd_allreduce_grads(
            [flat_grads[i] for i in shared], [flat_sources[i] for i in shared])
        out = list(flat_grads)
        for i, r in zip(shared, reduced):
            out[i] = r
        return tf.nest.pack_sequence_as(grads, out)


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
                            groups=None, process_set=None):
    """Wrap a ``tf.GradientTape`` so ``gradient()`` returns allreduced gradients.

    Works eagerly and inside ``tf.function``, with Keras 3 variables, persistent
    tapes and nested structures of sources. The result is an instance of the
    given tape's class.

    Args:
      gradtape: the tape that recorded the forward pass.
      device_dense, device_sparse, compression, sparse_as_dense, op,
      gradient_predivide_factor, num_groups, groups, process_set: as for
        ``DistributedOptimizer``.
    """
    if not isinstance(gradtape, tf.GradientTape):
        raise TypeError("DistributedGradientTape needs a tf.GradientTape, got %r"
                        % (type(gradtape),))
    if isinstance(gradtape, _DistributedTapeMixin):
        raise ValueError("the tape is already a DistributedGradientTape")
    groups = groups_from_num_groups(num_groups, groups)
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != "
                         "Average")
    allreduce_grads = make_allreduce_grads_fn(
        "DistributedGradientTape", device_dense, device_sparse, compression,
        sparse_as_dense, op, gradient_predivide_factor, groups, process_set)
    return _distributed_tape_class(type(gradtape))(gradtape, allreduce_grads)


def PartialDistributedGradientTape(gradtape, device_dense='', device_sparse='',
                                   compression=Compression.none,
                                   sparse_as_dense=False, op=Average,
                                   gradient_predivide_factor=1.0, num_groups=0,
                                   groups=None, local_layers=None):
    """A DistributedGradientTape that leaves the gradients of the variables of
    ``local_layers`` (a Keras layer or a list of them) as this rank computed
    them, without any allreduce."""
    tape = DistributedGradientTape(
        gradtape, device_dense=device_dense, device_sparse=device_sparse,
        compression=compression, sparse_as_dense=sparse_as_dense, op=op,
        gradient_predivide_factor=gradient_predivide_factor,
        num_groups=num_groups, groups=groups)
    if local_layers is None:
        local_layers = []
    elif not isinstance(local_layers, (list, tuple)):
        local_layers = [local_layers]
    for layer in local_layers:
        for var in layer.trainable_weights:
            tape.register_local_source(var)
    return tape

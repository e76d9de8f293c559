"""tf_hvd.keras: Horovod's ``horovod.tensorflow.keras`` API for Keras 3.

    import tf_hvd.keras as hvd
    hvd.init()
    opt = hvd.DistributedOptimizer(keras.optimizers.Adam(0.001 * hvd.size()))
    model.compile(optimizer=opt, loss=..., metrics=[...])
    model.fit(x, y, callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                               hvd.callbacks.MetricAverageCallback()],
              verbose=1 if hvd.rank() == 0 else 0)
"""

import tensorflow as tf

from tf_hvd import (init, shutdown, is_initialized, size, rank, local_size,
                    local_rank, cross_size, cross_rank, mpi_built, mpi_enabled,
                    gloo_built, gloo_enabled, nccl_built, cuda_built,
                    broadcast_object, allgather_object)
from tf_hvd import functions as _functions
from tf_hvd import ops as _ops
from tf_hvd.compression import Compression
from tf_hvd.basics import Average, Sum, Adasum, Min, Max, Product
from tf_hvd.process_sets import (ProcessSet, global_process_set, add_process_set,
                                 remove_process_set)
from tf_hvd.keras import callbacks
from tf_hvd.keras.optimizer import (create_distributed_optimizer,
                                    distributed_optimizer_class,
                                    is_distributed_optimizer)


def DistributedOptimizer(optimizer, name=None, device_dense='', device_sparse='',
                         compression=Compression.none, sparse_as_dense=False,
                         gradient_predivide_factor=1.0, op=Average,
                         backward_passes_per_step=1,
                         average_aggregated_gradients=False, num_groups=0,
                         groups=None, process_set=None):
    """Wrap a Keras 3 optimizer so that gradients are averaged over all ranks.

    Returns a new optimizer of a subclass of ``type(optimizer)`` with the same
    configuration (and state, if the given one was built). See
    ``tf_hvd.DistributedOptimizer`` for the arguments and
    ``tf_hvd.keras.optimizer`` for what differs from Horovod's tf.keras wrapper.
    """
    from tf_hvd.allreduce_grads import groups_from_num_groups
    groups = groups_from_num_groups(num_groups, groups)
    return create_distributed_optimizer(
        optimizer, name=name, device_dense=device_dense,
        device_sparse=device_sparse, compression=compression,
        sparse_as_dense=sparse_as_dense, op=op,
        gradient_predivide_factor=gradient_predivide_factor,
        backward_passes_per_step=backward_passes_per_step,
        average_aggregated_gradients=average_aggregated_gradients,
        groups=groups, process_set=process_set)


def _model_variables(model):
    variables = list(model.variables)
    opt = getattr(model, "optimizer", None)
    if opt is not None and getattr(opt, "built", False):
        variables += list(opt.variables)
    return variables


def broadcast_variables(variables, root_rank):
    """Broadcast the given (Keras or TF) variables from ``root_rank``."""
    return _functions.broadcast_variables(variables, root_rank)


def broadcast_global_variables(root_rank, model=None):
    """Broadcast the model's and its optimizer's variables from ``root_rank``.

    Keras 3 keeps no global collection of variables, so pass the ``model``
    (its weights and, once built, its optimizer's variables are broadcast).
    Without a model this only works in a TF1 graph (``tf.compat.v1`` global
    variables). In ``model.fit`` prefer
    ``callbacks.BroadcastGlobalVariablesCallback(root_rank)``.
    """
    if model is not None:
        return _functions.broadcast_variables(_model_variables(model), root_rank)
    if not tf.executing_eagerly():
        return _functions.broadcast_global_variables(root_rank)
    raise ValueError(
        "Keras 3 has no global variables: call "
        "broadcast_global_variables(root_rank, model=model) or "
        "broadcast_variables(model.variables + model.optimizer.variables, "
        "root_rank)")


def _to_tensor(value):
    if isinstance(value, (tf.Tensor, tf.Variable)):
        return tf.convert_to_tensor(value)
    import keras
    return tf.convert_to_tensor(keras.ops.convert_to_numpy(value)
                                if isinstance(value, keras.Variable) else value)


def allreduce(value, name=None, average=None, prescale_factor=1.0,
              postscale_factor=1.0, op=None, compression=Compression.none):
    """Allreduce a value (tensor, numpy array, Python number); returns a tensor."""
    return _ops.allreduce(_to_tensor(value), average=average,
                          compression=compression, op=op,
                          prescale_factor=prescale_factor,
                          postscale_factor=postscale_factor, name=name)


def allgather(value, name=None):
    """Concatenate ``value`` of every rank along dimension 0; returns a tensor."""
    return _ops.allgather(_to_tensor(value), name=name)


def broadcast(value, root_rank, name=None):
    """``value`` of ``root_rank`` on every rank; returns a tensor."""
    return _ops.broadcast(_to_tensor(value), root_rank, name=name)


def reducescatter(value, name=None, op=Average):
    """Reduce ``value`` over ranks and give each rank its part of dimension 0."""
    return _ops.reducescatter(_to_tensor(value), name=name, op=op)


def _optimizer_classes():
    import keras
    found = {}
    for attr in dir(keras.optimizers):
        obj = getattr(keras.optimizers, attr)
        if (isinstance(obj, type) and issubclass(obj, keras.optimizers.Optimizer)
                and obj is not keras.optimizers.Optimizer):
            found[obj.__name__] = obj
    return found


def load_model(filepath, custom_optimizers=None, custom_objects=None,
               compression=Compression.none):
    """Load a saved Keras model with its optimizer wrapped in a
    DistributedOptimizer (with the given ``compression``).

    Args:
      filepath: a ``.keras`` (or legacy ``.h5``) file.
      custom_optimizers: optional list of custom optimizer classes to wrap too.
      custom_objects: optional dict of other custom objects.
    """
    import keras
    classes = _optimizer_classes()
    for cls in custom_optimizers or []:
        classes[cls.__name__] = cls
    objects = {}
    for name, cls in classes.items():
        wrapped = distributed_optimizer_class(cls, compression=compression)
        # Keras looks objects up by their registered name ("package>Name"
        # for registered custom classes), plain or lower-case class name.
        for key in (name, name.lower(), keras.saving.get_registered_name(cls)):
            objects[key] = wrapped
    if custom_objects:
        objects.update(custom_objects)
    # Classes registered with register_keras_serializable outrank any
    # custom_objects inside Keras' deserialization, so their registrations are
    # swapped for the wrapped classes while loading.
    registered = keras.saving.get_custom_objects()
    swapped = {key: registered[key] for key in objects if key in registered}
    try:
        for key in swapped:
            registered[key] = objects[key]
        with keras.saving.CustomObjectScope(objects):
            return keras.models.load_model(filepath, custom_objects=objects)
    finally:
        registered.update(swapped)


__all__ = [
    "init", "shutdown", "is_initialized", "size", "rank", "local_size",
    "local_rank", "cross_size", "cross_rank", "mpi_built", "mpi_enabled",
    "gloo_built", "gloo_enabled", "nccl_built", "cuda_built",
    "broadcast_object", "allgather_object", "Compression", "Average", "Sum",
    "Adasum", "Min", "Max", "Product", "DistributedOptimizer",
    "broadcast_variables", "broadcast_global_variables", "allreduce",
    "allgather", "broadcast", "reducescatter", "load_model", "callbacks",
    "is_distributed_optimizer",
]

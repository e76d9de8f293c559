"""tf_hvd.keras: Horovod's ``horovod.tensorflow.keras`` (and ``horovod.keras``) API.

Works with Keras 3 and, for scripts written for Keras 2, with tf-keras 2.21
(``pip install tf-keras==2.21.0`` and ``TF_USE_LEGACY_KERAS=1``, which makes
``tf.keras`` tf-keras): optimizers, layers, models and callbacks of either
Keras are accepted; classes this module makes (callbacks, the
SyncBatchNormalization layer) follow ``tf.keras``. docs/parity-keras.md lists
every Horovod name and its status here.

    import tf_hvd.keras as hvd
    hvd.init()
    opt = hvd.DistributedOptimizer(keras.optimizers.Adam(0.001 * hvd.size()))
    model.compile(optimizer=opt, loss=..., metrics=[...])
    model.fit(x, y, callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                               hvd.callbacks.MetricAverageCallback()],
              verbose=1 if hvd.rank() == 0 else 0)
"""

import os

import tensorflow as tf

from tf_hvd import functions as _functions
from tf_hvd import ops as _ops
from tf_hvd._keras import flavors as _flavors
from tf_hvd._keras.optimizer import (create_distributed_optimizer,
                                     distributed_optimizer_class,
                                     is_distributed_optimizer)
from tf_hvd._keras.sharded_state.protocol import holders as _sharded_state_holders
from tf_hvd.basics import init, shutdown
from tf_hvd.checkpoint import atomic as _atomic
from tf_hvd.compression import Compression
from tf_hvd.functions import allgather_object, broadcast_object
from tf_hvd.keras import callbacks, elastic
from tf_hvd.process_sets import (ProcessSet, global_process_set, add_process_set,
                                 remove_process_set)
from tf_hvd.reduce_ops import Average, Sum, Adasum, Min, Max, Product
from tf_hvd.reduction_params import ReductionParams
from tf_hvd.sync_batch_norm import sync_batch_norm_class
from tf_hvd.topology import (is_initialized, size, rank, local_size, local_rank,
                             cross_size, cross_rank, is_homogeneous, mpi_built,
                             mpi_enabled, mpi_threads_supported, gloo_built,
                             gloo_enabled, nccl_built, ddl_built, ccl_built,
                             cuda_built, rocm_built, start_timeline, stop_timeline)


def DistributedOptimizer(optimizer, name=None, device_dense='', device_sparse='',
                         compression=Compression.none, sparse_as_dense=False,
                         gradient_predivide_factor=1.0, op=Average,
                         backward_passes_per_step=1,
                         average_aggregated_gradients=False, num_groups=0,
                         groups=None, process_set=None,
                         scale_local_gradients=True, sharded=False):
    """Wrap a Keras optimizer so that gradients are averaged over all ranks.

    Takes a Keras 3 optimizer, a tf-keras 2 optimizer
    (``tf_keras.optimizers.*``) or a tf-keras legacy one
    (``tf_keras.optimizers.legacy.*``, what Horovod's examples use). Returns a
    new optimizer of a subclass of ``type(optimizer)`` with the same
    configuration (and, for Keras 3, state, if the given one was built). The
    parameters are Horovod's, in Horovod's order (see
    ``tf_hvd.DistributedOptimizer``); ``process_set`` limits the reduction
    to that hvd.ProcessSet's ranks. The result has ``register_local_var(var)``: that variable's
    gradient stays local (divided by ``size()`` when
    ``scale_local_gradients``, as in Horovod). ``tf_hvd._keras.keras3_optimizer`` and
    ``tf_hvd._keras.tf_keras_optimizer`` say where each kind reduces.

    ``sharded=True`` (a tf_hvd addition; Keras 3 optimizers of the supported
    classes, and tf-keras' own ones of the same names) keeps the optimizer's
    slots for 1/N of the parameters on each rank (ZeRO-1): gradients are
    averaged by reduce-scatter, each rank updates its slice and the parameters
    are allgathered. ``opt.variables`` then lists
    the state this rank holds; ``opt.gather_state()`` (every rank) collects the
    whole state for an ordinary Keras checkpoint. docs/training.md, "Sharded
    optimizer state", says what composes with it and what it costs.

    Example:

    >>> hvd.init()
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> opt = hvd.DistributedOptimizer(keras.optimizers.Adam(1e-3 * hvd.size()))
    >>> model.compile(optimizer=opt, loss="mse")
    >>> history = model.fit(np.ones((8, 2)), np.ones((8, 1)), epochs=2, verbose=0)
    >>> len(history.history["loss"]), isinstance(opt, keras.optimizers.Adam)
    (2, True)
    >>> sharded = hvd.DistributedOptimizer(keras.optimizers.Adam(1e-3), sharded=True)
    >>> model.compile(optimizer=sharded, loss="mse")
    >>> history = model.fit(np.ones((8, 2)), np.ones((8, 1)), epochs=1, verbose=0)
    >>> [tuple(v.shape) for v in sharded.variables]  # 1 rank: 3 elements per slot
    [(), (), (3,), (3,)]
    """
    sharded = bool(sharded)
    params = ReductionParams.from_call(locals())
    return create_distributed_optimizer(optimizer, params, sharded=sharded)


def _is_layer(obj):
    import keras
    if isinstance(obj, keras.layers.Layer):
        return True
    return _flavors.is_tf_keras(obj) and isinstance(
        obj, _flavors.tf_keras_module().layers.Layer)


def PartialDistributedOptimizer(optimizer, name=None, device_dense='',
                                device_sparse='', compression=Compression.none,
                                sparse_as_dense=False,
                                gradient_predivide_factor=1.0, op=Average,
                                groups=None, process_set=None, local_layers=None,
                                scale_local_gradients=True, backward_passes_per_step=1,
                                average_aggregated_gradients=False):
    """A DistributedOptimizer that keeps the gradients of ``local_layers``
    (a layer or a list of layers, e.g. a model-parallel part) on each rank.

    Every trainable weight of those layers is registered with
    ``register_local_var``; the other arguments are DistributedOptimizer's.
    The parameters are those of Horovod 0.28's ``horovod.keras``
    PartialDistributedOptimizer, in its order, then (tf_hvd's)
    ``backward_passes_per_step`` and ``average_aggregated_gradients``.

    Example:

    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(4),
    ...                           keras.layers.Dense(1)])
    >>> opt = hvd.PartialDistributedOptimizer(keras.optimizers.SGD(0.1),
    ...                                       local_layers=[model.layers[-1]])
    >>> model.compile(optimizer=opt, loss="mse")   # the last layer trains per rank
    >>> history = model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=1, verbose=0)
    >>> len(history.history["loss"])
    1
    """
    params = ReductionParams.from_call(locals())
    if local_layers is None:
        local_layers = []
    elif _is_layer(local_layers):
        local_layers = [local_layers]
    else:
        local_layers = list(local_layers)
        bad = [type(l).__name__ for l in local_layers if not _is_layer(l)]
        if bad:
            raise ValueError("All local layers must be Keras layers; got %s"
                             % ", ".join(bad))
    opt = create_distributed_optimizer(optimizer, params)
    for layer in local_layers:
        for var in layer.trainable_weights:
            opt.register_local_var(var)
    return opt


def _model_variables(model):
    return _flavors.model_and_optimizer_variables(model)


def broadcast_variables(variables, root_rank):
    """Broadcast the given (Keras or TF) variables from ``root_rank``."""
    return _functions.broadcast_variables(variables, root_rank)


def broadcast_global_variables(root_rank, model=None):
    """Broadcast the model's and its optimizer's variables from ``root_rank``.

    Keras 3 keeps no global collection of variables, so pass the ``model``
    (its weights and, once built, its optimizer's variables are broadcast).
    Without a model this only works in a TF1 graph (``tf.compat.v1`` global
    variables); eagerly it raises RuntimeError, as Horovod's. In ``model.fit`` prefer
    ``callbacks.BroadcastGlobalVariablesCallback(root_rank)``.
    """
    if model is not None:
        return _functions.broadcast_variables(_model_variables(model), root_rank)
    if not tf.executing_eagerly():
        return _functions.broadcast_global_variables(root_rank)
    raise RuntimeError(
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


def _optimizer_classes(optimizers_module, base):
    found = {}
    for attr in dir(optimizers_module):
        obj = getattr(optimizers_module, attr)
        if isinstance(obj, type) and issubclass(obj, base) and obj is not base:
            found[obj.__name__] = obj
    return found


def _wrapped_optimizer_objects(classes, compression, registered_name, sharded=False):
    objects = {}
    for name, cls in classes.items():
        wrapped = distributed_optimizer_class(cls, ReductionParams(compression=compression),
                                              sharded=sharded)
        # Keras looks objects up by their registered name ("package>Name"
        # for registered custom classes), plain or lower-case class name.
        for key in (name, name.lower(), registered_name(cls)):
            objects[key] = wrapped
    return objects


def load_model(filepath, custom_optimizers=None, custom_objects=None,
               compression=Compression.none, legacy_opts=False, sharded=False):
    """Load a saved Keras model with its optimizer wrapped in a
    DistributedOptimizer (with the given ``compression``), so training goes on
    from the saved optimizer state.

    The model is loaded with ``tf.keras``' Keras: Keras 3 (``.keras`` files,
    or legacy ``.h5``), or tf-keras 2 when ``TF_USE_LEGACY_KERAS=1``
    (``.h5``, ``.keras`` or SavedModel directories).

    Args:
      filepath: the saved model.
      custom_optimizers: optional list of custom optimizer classes to wrap too.
      custom_objects: optional dict of other custom objects.
      compression: gradient compression of the wrapped optimizer.
      legacy_opts: the model was trained with ``tf.keras.optimizers.legacy``
        optimizers (tf-keras only; Keras 3 has none: ValueError).
      sharded: the optimizer comes back as a sharded
        DistributedOptimizer, each rank taking its slice of the saved (whole)
        optimizer state; the file may come from any number of ranks, sharded
        or not. Every rank must call it (the layout is checked across ranks).

        model = hvd.load_model("model.keras")   # optimizer is distributed
    """
    keras_module = _flavors.default_keras()
    sync_bn = sync_batch_norm_class(keras_module)
    if _flavors.is_tf_keras(keras_module.optimizers.Optimizer):
        if sharded and legacy_opts:
            raise ValueError("load_model(sharded=True) takes tf-keras' optimizers, not the "
                             "legacy ones (legacy_opts=True): their state cannot be sharded")
        return _load_tf_keras_model(keras_module, filepath, custom_optimizers,
                                    custom_objects, compression, legacy_opts,
                                    sync_bn, sharded)
    if legacy_opts:
        raise ValueError(
            "load_model(legacy_opts=True) needs tf-keras 2 (Keras 3 has no "
            "legacy optimizers): install tf-keras and set "
            "TF_USE_LEGACY_KERAS=1 before importing TensorFlow")
    import keras
    classes = _optimizer_classes(keras.optimizers, keras.optimizers.Optimizer)
    for cls in custom_optimizers or []:
        classes[cls.__name__] = cls
    objects = _wrapped_optimizer_objects(classes, compression,
                                         keras.saving.get_registered_name, sharded)
    objects.setdefault("SyncBatchNormalization", sync_bn)
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


def save_model(model, filepath, root_rank=0, **kwargs):
    """Save ``model`` with its optimizer state on ``root_rank`` only (``model.save``,
    an ordinary Keras file that plain ``keras.models.load_model`` reads).

    Call it on every rank: with a sharded DistributedOptimizer the ranks first
    gather the whole optimizer state to ``root_rank`` (``optimizer.gather_state``),
    and the tables of DistributedEmbedding layers (with their optimizer slots) are
    gathered there whole (``tf_hvd.keras.layers.save_embedding_shards`` writes each
    rank's rows instead); otherwise the other ranks do nothing. ``kwargs`` go to
    ``model.save``. The file is written under a temporary name beside ``filepath``,
    synced, then renamed onto it: the previous file stays whole until the new one is,
    and a failed write (a full disk, no permission) raises CheckpointSaveError naming
    the path::

        hvd.save_model(model, "checkpoint.keras")          # every rank
        model = hvd.load_model("checkpoint.keras", sharded=True)   # any np
    """
    # every holder of sharded state (tables, then a sharded optimizer's slots)
    for holder in _sharded_state_holders(model, getattr(model, "optimizer", None)):
        holder.gather_for_save(root_rank)   # whole to root_rank
    if rank() == int(root_rank):
        _save_atomically(model, filepath, kwargs)


_FILE_FORMATS = (".keras", ".h5", ".hdf5")


def _save_atomically(model, filepath, kwargs):
    # model.save writes in place: a kill or a full disk mid-write would leave a
    # truncated file where the previous checkpoint was. Written to a temporary beside
    # it and renamed, the previous file stays until the new one is whole.
    path = os.fspath(filepath) if isinstance(filepath, (str, os.PathLike)) else None
    if (path is None or "://" in path
            or not path.lower().endswith(_FILE_FORMATS)      # tf-keras' SavedModel dir
            or (kwargs.get("overwrite", True) is False and os.path.exists(path))):
        model.save(filepath, **kwargs)   # Keras' own handling (asks before overwriting)
        return
    with _atomic.replace_file(path) as tmp:
        model.save(tmp, **kwargs)


def _load_tf_keras_model(tf_keras, filepath, custom_optimizers, custom_objects,
                         compression, legacy_opts, sync_bn, sharded=False):
    if legacy_opts:
        module, base = tf_keras.optimizers.legacy, tf_keras.optimizers.legacy.Optimizer
    else:
        module, base = tf_keras.optimizers, tf_keras.optimizers.Optimizer
    classes = _optimizer_classes(module, base)
    for cls in custom_optimizers or []:
        classes[cls.__name__] = cls
    objects = _wrapped_optimizer_objects(
        classes, compression, tf_keras.utils.get_registered_name, sharded)
    objects.setdefault("SyncBatchNormalization", sync_bn)
    if custom_objects:
        objects.update(custom_objects)
    with tf_keras.utils.custom_object_scope(objects):
        return tf_keras.models.load_model(filepath, custom_objects=objects)


def __getattr__(name):
    # The layer class is made for tf.keras' Keras on first use (so importing
    # this module does not import tf-keras unless the script asked for it).
    if name == "SyncBatchNormalization":
        return sync_batch_norm_class()
    if name == "layers":  # imports Keras: only when asked for
        import importlib
        return importlib.import_module("tf_hvd.keras.layers")
    raise AttributeError("module 'tf_hvd.keras' has no attribute %r" % (name,))


__all__ = [
    "init", "shutdown", "is_initialized", "size", "rank", "local_size",
    "local_rank", "cross_size", "cross_rank", "is_homogeneous", "mpi_built",
    "mpi_enabled", "mpi_threads_supported", "gloo_built", "gloo_enabled",
    "nccl_built", "ddl_built", "ccl_built", "cuda_built", "rocm_built",
    "start_timeline", "stop_timeline", "broadcast_object", "allgather_object",
    "Compression", "Average", "Sum", "Adasum", "Min", "Max", "Product",
    "DistributedOptimizer", "PartialDistributedOptimizer",
    "SyncBatchNormalization", "broadcast_variables",
    "broadcast_global_variables", "allreduce", "allgather", "broadcast",
    "reducescatter", "load_model", "save_model", "callbacks", "elastic", "is_distributed_optimizer",
]

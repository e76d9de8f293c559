"""tf_hvd: Horovod-style data-parallel training for TensorFlow 2 / Keras 3.

Use it as ``import tf_hvd as hvd`` where a script had
``import horovod.tensorflow as hvd``::

    hvd.init()
    grads = hvd.allreduce(grads)        # average over all processes
    hvd.broadcast_variables(model.variables, root_rank=0)

The TensorFlow part (TensorFlow itself and the native library
``tf_hvd/_hvd.so``) is loaded on first use of any of these names, so that
``python -m tf_hvd.runner`` and other TensorFlow-free tools start quickly.
"""

import importlib

__version__ = "0.1.0"

# Public names and the module that defines each (the layers below this facade).
_EXPORTS = {
    "tf_hvd.basics": ("init", "shutdown"),
    "tf_hvd.topology": (
        "is_initialized", "size", "rank", "local_size", "local_rank",
        "cross_size", "cross_rank", "is_homogeneous", "mpi_built", "mpi_enabled",
        "mpi_threads_supported", "gloo_built", "gloo_enabled", "nccl_built", "cuda_built",
        "rocm_built", "ddl_built", "ccl_built", "start_timeline", "stop_timeline",
    ),
    "tf_hvd.reduce_ops": ("Average", "Sum", "Adasum", "Min", "Max", "Product"),
    "tf_hvd.ops": (
        "allreduce", "grouped_allreduce", "allgather", "grouped_allgather", "broadcast",
        "alltoall", "reducescatter", "grouped_reducescatter", "join", "barrier",
        "size_op", "rank_op", "local_size_op", "local_rank_op",
        "process_set_included_op", "handle_average_backwards_compatibility",
        "check_num_rank_power_of_2",
    ),
    "tf_hvd.process_sets": (
        "ProcessSet", "global_process_set", "add_process_set", "remove_process_set",
    ),
    "tf_hvd.compression": ("Compression", "Compressor", "NoneCompressor", "FP16Compressor"),
    "tf_hvd.functions": (
        "broadcast_variables", "broadcast_global_variables", "broadcast_object",
        "allgather_object", "broadcast_", "broadcast_object_fn",
    ),
    "tf_hvd.optimizer": ("DistributedOptimizer",),
    "tf_hvd.tape": ("DistributedGradientTape", "PartialDistributedGradientTape"),
    "tf_hvd.hooks": ("BroadcastGlobalVariablesHook",),
    "tf_hvd.gradient_aggregation": ("LocalGradientAggregationHelper",
                                    "LocalGradientAggregationHelperEager"),
}

# Names made on first use (the layer class needs Keras, which plain TF scripts
# need not import).
_LAZY_EXPORTS = {"SyncBatchNormalization": "tf_hvd.sync_batch_norm",
                 "Checkpointer": "tf_hvd._keras.checkpointer"}

# Submodules reachable as attributes (``hvd.elastic.run``), as in Horovod.
_SUBMODULES = ("elastic", "keras", "runner", "optimizer", "tape", "hooks",
               "gradient_aggregation", "allreduce_grads", "basics", "topology", "ops",
               "compression", "functions", "process_sets", "reduce_ops", "mpi_ops")

_state = {"done": False}


def _load_api():
    """Imports the TensorFlow-backed modules and binds their public names here
    (a name missing from its module is an error, never silently left out)."""
    if _state["done"]:
        return
    namespace = globals()
    for module_name, names in _EXPORTS.items():
        module = importlib.import_module(module_name)
        for name in names:
            namespace[name] = getattr(module, name)
    _state["done"] = True


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    if name in _SUBMODULES:
        return importlib.import_module("%s.%s" % (__name__, name))
    if name == "run":  # horovod.run: the launch API, without loading TensorFlow
        return importlib.import_module(__name__ + ".runner").run
    if name in _LAZY_EXPORTS:
        _load_api()
        return getattr(importlib.import_module(_LAZY_EXPORTS[name]), name)
    if any(name in names for names in _EXPORTS.values()):
        _load_api()
        return globals()[name]
    # Anything else is no attribute, without loading TensorFlow: ``from tf_hvd
    # import build_info`` asks here first, then imports the submodule.
    raise AttributeError("module 'tf_hvd' has no attribute %r" % (name,))


def __dir__():
    _load_api()
    return sorted(set(globals()) | set(_LAZY_EXPORTS))

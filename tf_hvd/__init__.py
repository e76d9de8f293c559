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

# Public names and the module that defines each.
_CORE_EXPORTS = {
    "tf_hvd.basics": (
        "init", "shutdown", "is_initialized", "size", "rank", "local_size", "local_rank",
        "cross_size", "cross_rank", "is_homogeneous", "mpi_built", "mpi_enabled",
        "mpi_threads_supported", "gloo_built", "gloo_enabled", "nccl_built", "cuda_built",
        "rocm_built", "ddl_built", "ccl_built", "start_timeline", "stop_timeline",
        "Average", "Sum", "Adasum", "Min", "Max", "Product",
    ),
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
}

# Modules written separately; each is exported when present. A module's
# __all__ decides what it exports, else these names (the ones it defines).
_OPTIONAL_EXPORTS = {
    "tf_hvd.optimizer": ("DistributedOptimizer", "PartialDistributedOptimizer"),
    "tf_hvd.tape": ("DistributedGradientTape", "PartialDistributedGradientTape"),
    "tf_hvd.hooks": ("BroadcastGlobalVariablesHook",),
    "tf_hvd.gradient_aggregation": ("LocalGradientAggregationHelper",
                                    "LocalGradientAggregationHelperEager"),
}

# Names made on first use (the layer class needs Keras, which plain TF scripts
# need not import).
_LAZY_EXPORTS = {"SyncBatchNormalization": "tf_hvd.sync_batch_norm"}

_SUBPACKAGES = ("keras", "runner", "optimizer", "tape", "hooks", "gradient_aggregation",
                "allreduce_grads", "basics", "ops", "compression", "functions",
                "process_sets")

_state = {"core": False, "done": False}


def _import_optional(module_name):
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name == module_name:
            return None  # that file does not exist (yet): nothing to export
        raise


def _load_api():
    """Imports the TensorFlow-backed modules and binds their public names here."""
    if _state["core"]:
        # Done, or re-entered from an optional module importing tf_hvd names:
        # the core names are bound already.
        return
    namespace = globals()
    for module_name, names in _CORE_EXPORTS.items():
        module = importlib.import_module(module_name)
        for name in names:
            namespace[name] = getattr(module, name)
    _state["core"] = True
    for module_name, names in _OPTIONAL_EXPORTS.items():
        module = _import_optional(module_name)
        if module is None:
            continue
        for name in getattr(module, "__all__", names):
            if hasattr(module, name):
                namespace[name] = getattr(module, name)
    _state["done"] = True


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    if name in _SUBPACKAGES:
        return importlib.import_module("%s.%s" % (__name__, name))
    if name == "run":  # horovod.run: the launch API, without loading TensorFlow
        return importlib.import_module(__name__ + ".runner").run
    if name in _LAZY_EXPORTS:
        _load_api()
        return getattr(importlib.import_module(_LAZY_EXPORTS[name]), name)
    _load_api()
    if name in globals():
        return globals()[name]
    raise AttributeError("module 'tf_hvd' has no attribute %r" % (name,))


def __dir__():
    _load_api()
    return sorted(set(globals()) | set(_LAZY_EXPORTS))

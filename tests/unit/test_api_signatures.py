"""Every public function of horovod.tensorflow 0.28 takes its parameters here in
Horovod's order, with Horovod's defaults, so that a positional call means what
it means in Horovod.

HOROVOD_0_28 records Horovod's signatures (written from horovod/tensorflow/
__init__.py, mpi_ops.py, functions.py and gradient_aggregation*.py of 0.28).
A tf_hvd function may add parameters after Horovod's (listed in EXTENSIONS),
and may give a default to a parameter Horovod requires. Horovod's
``process_set=global_process_set`` is ``process_set=None`` here (the global
set).
"""

import inspect

import pytest

import tf_hvd as hvd

REQUIRED = object()   # a parameter without a default
GPS = object()        # Horovod's global_process_set (None here)
NONE_COMPRESSION = object()

_COLLECTIVE_OPT = [("name", None), ("ignore_name_scope", False), ("process_set", GPS)]

HOROVOD_0_28 = {
    "init": [("comm", None), ("process_sets", None)],
    "shutdown": [], "is_initialized": [], "size": [], "local_size": [], "cross_size": [],
    "rank": [], "local_rank": [], "cross_rank": [], "is_homogeneous": [],
    "mpi_threads_supported": [], "mpi_enabled": [], "mpi_built": [], "gloo_enabled": [],
    "gloo_built": [], "nccl_built": [], "ddl_built": [], "ccl_built": [], "cuda_built": [],
    "rocm_built": [],
    "start_timeline": [("file_path", REQUIRED), ("mark_cycles", False)],
    "stop_timeline": [],
    "allreduce": [("tensor", REQUIRED), ("average", None), ("device_dense", ""),
                  ("device_sparse", ""), ("compression", NONE_COMPRESSION), ("op", None),
                  ("prescale_factor", 1.0), ("postscale_factor", 1.0), ("name", None),
                  ("process_set", GPS), ("ignore_name_scope", False)],
    "grouped_allreduce": [("tensors", REQUIRED), ("average", None), ("device_dense", ""),
                          ("device_sparse", ""), ("compression", NONE_COMPRESSION),
                          ("op", None), ("prescale_factor", 1.0), ("postscale_factor", 1.0),
                          ("process_set", GPS), ("ignore_name_scope", False),
                          ("name", None)],
    "reducescatter": [("tensor", REQUIRED), ("device_dense", ""),
                      ("compression", NONE_COMPRESSION), ("op", hvd.Average), ("name", None),
                      ("process_set", GPS), ("ignore_name_scope", False),
                      ("prescale_factor", 1.0), ("postscale_factor", 1.0)],
    "grouped_reducescatter": [("tensors", REQUIRED), ("device_dense", ""),
                              ("compression", NONE_COMPRESSION), ("op", hvd.Average),
                              ("process_set", GPS), ("prescale_factor", 1.0),
                              ("postscale_factor", 1.0)],
    "allgather": [("tensor", REQUIRED)] + _COLLECTIVE_OPT,
    "grouped_allgather": [("tensors", REQUIRED)] + _COLLECTIVE_OPT,
    "broadcast": [("tensor", REQUIRED), ("root_rank", REQUIRED)] + _COLLECTIVE_OPT,
    "broadcast_": [("variables", REQUIRED), ("root_rank", REQUIRED), ("name", None),
                   ("process_set", GPS)],
    "alltoall": [("tensor", REQUIRED), ("splits", None)] + _COLLECTIVE_OPT,
    "join": [],
    "size_op": [("process_set_id", 0), ("name", None)],
    "process_set_included_op": [("process_set_id", 0), ("name", None)],
    "local_size_op": [("name", None)],
    "rank_op": [("name", None)],
    "local_rank_op": [("name", None)],
    "broadcast_variables": [("variables", REQUIRED), ("root_rank", REQUIRED),
                            ("process_set", GPS), ("inplace", False)],
    "broadcast_global_variables": [("root_rank", REQUIRED)],
    "broadcast_object": [("obj", REQUIRED), ("root_rank", 0), ("session", None),
                         ("name", None), ("process_set", GPS)],
    "broadcast_object_fn": [("root_rank", 0), ("session", None), ("name", None),
                            ("process_set", GPS)],
    "allgather_object": [("obj", REQUIRED), ("session", None), ("name", None),
                         ("process_set", GPS)],
    "handle_average_backwards_compatibility": [("op", REQUIRED), ("average", REQUIRED)],
    "check_num_rank_power_of_2": [("num_rank", REQUIRED)],
    "DistributedOptimizer": [
        ("optimizer", REQUIRED), ("name", None), ("use_locking", False),
        ("device_dense", ""), ("device_sparse", ""), ("compression", NONE_COMPRESSION),
        ("sparse_as_dense", False), ("backward_passes_per_step", 1), ("op", hvd.Average),
        ("gradient_predivide_factor", 1.0), ("average_aggregated_gradients", False),
        ("num_groups", 0), ("groups", None), ("process_set", GPS),
        ("scale_local_gradients", True)],
    "DistributedGradientTape": [
        ("gradtape", REQUIRED), ("device_dense", ""), ("device_sparse", ""),
        ("compression", NONE_COMPRESSION), ("sparse_as_dense", False), ("op", hvd.Average),
        ("gradient_predivide_factor", 1.0), ("num_groups", 0), ("groups", None),
        ("process_set", GPS), ("scale_local_gradients", True)],
    "PartialDistributedGradientTape": [
        ("gradtape", REQUIRED), ("device_dense", ""), ("device_sparse", ""),
        ("compression", NONE_COMPRESSION), ("sparse_as_dense", False), ("op", hvd.Average),
        ("gradient_predivide_factor", 1.0), ("num_groups", 0), ("groups", None),
        ("process_set", GPS), ("local_layers", None), ("scale_local_gradients", True)],
    "BroadcastGlobalVariablesHook": [("root_rank", REQUIRED), ("device", "")],
    "LocalGradientAggregationHelper": [
        ("backward_passes_per_step", REQUIRED), ("allreduce_func", REQUIRED),
        ("sparse_as_dense", REQUIRED), ("average_aggregated_gradients", REQUIRED),
        ("rank", REQUIRED), ("optimizer_type", REQUIRED), ("process_set", GPS),
        ("scale_local_gradients", True), ("name", "")],
    "LocalGradientAggregationHelperEager": [
        ("backward_passes_per_step", REQUIRED), ("allreduce_func", REQUIRED),
        ("sparse_as_dense", REQUIRED), ("average_aggregated_gradients", REQUIRED),
        ("local_gradients_scaling_factor", 1.0)],
}

# Methods users call on the wrappers (first parameter self left out).
HOROVOD_0_28_METHODS = {
    ("tape", "gradient"): [("target", REQUIRED), ("sources", REQUIRED),
                           ("output_gradients", None), ("use_generic_names", False)],
    ("tape", "get_local_and_global_gradients"): [
        ("target", REQUIRED), ("sources", REQUIRED), ("output_gradients", None),
        ("use_generic_names", False)],
    ("tape", "register_local_source"): [("source", REQUIRED)],
    ("optimizer", "register_local_var"): [("var", REQUIRED)],
    ("optimizer", "apply_gradients"): [("grads_and_vars", REQUIRED), ("global_step", None),
                                       ("name", None)],
    ("helper", "register_local_var"): [("var", REQUIRED)],
    ("helper", "compute_gradients"): [("grads", REQUIRED), ("vars", REQUIRED)],
    ("helper", "apply_gradients"): [("apply_grads_closure", REQUIRED),
                                    ("optimizer", REQUIRED)],
}

# Parameters tf_hvd adds after Horovod's, each on purpose.
EXTENSIONS = {
    "join": ["name", "process_set"],
    "DistributedOptimizer": ["sharded"],
    "grouped_reducescatter": ["name", "ignore_name_scope"],
    "LocalGradientAggregationHelperEager": ["name"],
    ("tape", "gradient"): ["unconnected_gradients"],
    ("helper", "apply_gradients"): ["args", "grads", "skip_fn", "kwargs"],
}


def _expected_default(value):
    if value is GPS:
        return None
    if value is NONE_COMPRESSION:
        return hvd.Compression.none
    return value


def _check(label, fn, horovod, extensions):
    params = list(inspect.signature(fn).parameters.values())
    if params and params[0].name == "self":
        params = params[1:]
    names = [p.name for p in params]
    want = [n for n, _ in horovod]
    assert names[:len(want)] == want, "%s: parameters %s, Horovod 0.28 has %s" % (
        label, names, want)
    assert names[len(want):] == list(extensions), (
        "%s: parameters beyond Horovod's %s are not listed as extensions %s" % (
            label, names[len(want):], extensions))
    for p, (name, default) in zip(params, horovod):
        assert p.kind in (p.POSITIONAL_OR_KEYWORD, p.POSITIONAL_ONLY), (label, name, p.kind)
        if default is REQUIRED:
            continue  # tf_hvd may give a default where Horovod has none
        assert p.default is not p.empty, "%s: %s has no default (Horovod: %r)" % (
            label, name, default)
        assert p.default == _expected_default(default), "%s: %s=%r, Horovod: %r" % (
            label, name, p.default, default)


@pytest.mark.parametrize("name", sorted(HOROVOD_0_28))
def test_signature_matches_horovod(name):
    fn = getattr(hvd, name)
    if inspect.isclass(fn):
        fn = fn.__init__
    _check(name, fn, HOROVOD_0_28[name], EXTENSIONS.get(name, ()))


def test_method_signatures_match_horovod():
    import tensorflow as tf
    tape_cls = type(hvd.DistributedGradientTape(tf.GradientTape()))
    owners = {"tape": tape_cls,
              "optimizer": type(hvd.DistributedOptimizer(
                  tf.compat.v1.train.GradientDescentOptimizer(0.1))),
              "helper": hvd.LocalGradientAggregationHelperEager}
    for (owner, method), horovod in sorted(HOROVOD_0_28_METHODS.items()):
        _check("%s.%s" % (owner, method), getattr(owners[owner], method), horovod,
               EXTENSIONS.get((owner, method), ()))
    graph_helper = hvd.LocalGradientAggregationHelper
    for method in ("register_local_var", "compute_gradients", "apply_gradients"):
        _check("graph helper." + method, getattr(graph_helper, method),
               HOROVOD_0_28_METHODS[("helper", method)],
               EXTENSIONS.get(("helper", method), ()))


def test_positional_calls_mean_what_they_mean_in_horovod():
    hvd.init()
    import tensorflow as tf
    assert int(hvd.size_op(0)) == 1
    x = tf.constant([4, 6], tf.int32)
    # reducescatter(tensor, device_dense, compression, op, name, process_set,
    #               ignore_name_scope, prescale_factor, postscale_factor)
    out = hvd.reducescatter(x, "", hvd.Compression.none, hvd.Sum, "rs_pos", None, False,
                            0.5, 3.0)
    assert out.numpy().tolist() == [6, 9]
    # grouped_allreduce(..., prescale_factor, postscale_factor, process_set,
    #                   ignore_name_scope, name)
    (g,) = hvd.grouped_allreduce([x], None, "", "", hvd.Compression.none, hvd.Sum, 1.0, 2.0,
                                 None, False, "ga_pos")
    assert g.numpy().tolist() == [8, 12]
    # grouped_reducescatter(tensors, device_dense, compression, op, process_set,
    #                       prescale_factor, postscale_factor)
    (r,) = hvd.grouped_reducescatter([x], "", hvd.Compression.none, hvd.Sum, None, 1.0, 0.5)
    assert r.numpy().tolist() == [2, 3]
    # DistributedOptimizer(..., sparse_as_dense, backward_passes_per_step, op, ...)
    opt = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1), None,
                                   False, "", "", hvd.Compression.none, False, 3)
    assert opt._agg_helper is not None and opt._agg_helper.backward_passes_per_step == 3


# hvd.mpi_ops (horovod/tensorflow/mpi_ops.py of 0.28): the raw ops that code written for
# Horovod calls there.
HOROVOD_0_28_MPI_OPS = {
    "_allreduce": [("tensor", REQUIRED), ("name", None), ("op", hvd.Sum),
                   ("prescale_factor", 1.0), ("postscale_factor", 1.0),
                   ("ignore_name_scope", False), ("process_set", GPS)],
    "_grouped_allreduce": [("tensors", REQUIRED), ("name", None), ("op", hvd.Sum),
                           ("prescale_factor", 1.0), ("postscale_factor", 1.0),
                           ("ignore_name_scope", False), ("process_set", GPS)],
    "allgather": [("tensor", REQUIRED)] + _COLLECTIVE_OPT,
    "grouped_allgather": [("tensors", REQUIRED)] + _COLLECTIVE_OPT,
    "broadcast": [("tensor", REQUIRED), ("root_rank", REQUIRED)] + _COLLECTIVE_OPT,
    "alltoall": [("tensor", REQUIRED), ("splits", None)] + _COLLECTIVE_OPT,
    "_reducescatter": [("tensor", REQUIRED), ("name", None), ("op", hvd.Sum),
                       ("ignore_name_scope", False), ("process_set", GPS),
                       ("prescale_factor", 1.0), ("postscale_factor", 1.0)],
    "_grouped_reducescatter": [("tensors", REQUIRED), ("name", None), ("op", hvd.Sum),
                               ("ignore_name_scope", False), ("process_set", GPS),
                               ("prescale_factor", 1.0), ("postscale_factor", 1.0)],
    "size_op": [("process_set_id", 0), ("name", None)],
}


@pytest.mark.parametrize("name", sorted(HOROVOD_0_28_MPI_OPS))
def test_mpi_ops_signature_matches_horovod(name):
    fn = getattr(hvd.mpi_ops, name)
    horovod = HOROVOD_0_28_MPI_OPS[name]
    params = inspect.signature(fn).parameters
    assert list(params) == [n for n, _ in horovod], name
    for pname, default in horovod:
        if default is GPS:  # the global set, as Horovod's object or tf_hvd's None
            got = params[pname].default
            assert got is None or got is hvd.global_process_set, (name, pname, got)
        elif default is not REQUIRED:
            assert params[pname].default == default, (name, pname, params[pname].default)

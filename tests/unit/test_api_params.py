"""ReductionParams: the DistributedOptimizer / DistributedGradientTape parameters as
one value, and the package facade's exports (each name resolves, none is dropped)."""

import importlib

import pytest
import tensorflow as tf

import tf_hvd as hvd
from tf_hvd.reduction_params import ReductionParams


@pytest.fixture(scope="module", autouse=True)
def _init():
    hvd.init()


def test_from_call_takes_the_fields_and_folds_num_groups():
    optimizer = object()
    params = ReductionParams.from_call(dict(optimizer=optimizer, local_layers=[], op=hvd.Sum,
                                            num_groups=2, groups=None,
                                            backward_passes_per_step="3"))
    assert (params.op, params.groups, params.backward_passes_per_step) == (hvd.Sum, 2, 3)
    assert params.compression is hvd.Compression.none and params.process_set is None
    assert params.replace(op=hvd.Average).op == hvd.Average


@pytest.mark.parametrize("arguments, message", [
    (dict(num_groups=2, groups=[[]]), "pass either num_groups or groups, not both"),
    (dict(op=hvd.Sum, gradient_predivide_factor=2.0),
     "gradient_predivide_factor not supported with op != Average"),
    (dict(backward_passes_per_step=0), "backward_passes_per_step must be >= 1, got 0"),
    (dict(process_set=hvd.ProcessSet([0])), "is not registered"),
])
def test_invalid_parameters_raise_value_error(arguments, message):
    with pytest.raises(ValueError, match=message):
        ReductionParams.from_call(arguments)


def test_every_wrapper_builds_its_params_once():
    tape = hvd.PartialDistributedGradientTape(tf.GradientTape(), op=hvd.Sum,
                                              scale_local_gradients=False)
    assert tape.scale_local_gradients is False
    with pytest.raises(ValueError, match="not supported with op != Average"):
        hvd.DistributedGradientTape(tf.GradientTape(), op=hvd.Sum,
                                    gradient_predivide_factor=2.0)
    opt = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1),
                                   backward_passes_per_step=2, scale_local_gradients=False)
    assert opt.scale_local_gradients is False and opt._agg_helper is not None
    adasum = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1),
                                      op=hvd.Adasum, backward_passes_per_step=3)
    assert type(adasum).__name__ == "DistributedAdasumOptimizer" and adasum._passes == 3


def test_package_exports_resolve_and_none_is_dropped():
    for module_name, names in hvd._EXPORTS.items():
        module = importlib.import_module(module_name)
        for name in names:
            assert getattr(hvd, name) is getattr(module, name), name
    # horovod.tensorflow has no PartialDistributedOptimizer (horovod.keras has).
    assert not hasattr(hvd, "PartialDistributedOptimizer")
    assert hvd.elastic.run is importlib.import_module("tf_hvd.elastic").run

"""The DistributedOptimizer for tf-keras 2 optimizers (``TF_USE_LEGACY_KERAS=1``).

Both of tf-keras' optimizer families are wrapped by a subclass made on the fly
(same class name, same config, so a saved model loads without tf_hvd):

* ``tf_keras.optimizers.legacy.*`` (OptimizerV2, what Horovod 0.28's examples
  use on TF >= 2.11): the gradients are reduced in ``_compute_gradients`` (the
  ``minimize`` path that ``model.fit`` takes) and ``get_gradients``, as in
  Horovod;
* ``tf_keras.optimizers.*`` (the Keras >= 2.11 optimizers): reduced in
  ``compute_gradients``, which their ``minimize`` calls. (Horovod 0.28 only
  hooks the OptimizerV2 names, so there these optimizers silently train
  without reducing; here they reduce.)

As in Horovod, ``apply_gradients(grads_and_vars)`` applies what it is given:
gradients computed outside the optimizer (a plain ``tf.GradientTape``) are
reduced with ``hvd.DistributedGradientTape``, or by calling
``opt.minimize(loss, var_list, tape=tape)``. With
``backward_passes_per_step > 1``, ``apply_gradients`` applies only on every
that-many-th pass (the others only accumulate), so ``iterations`` counts
applied updates.

    opt = hvd.DistributedOptimizer(tf.keras.optimizers.legacy.Adam(1e-3))
    model.compile(optimizer=opt, loss=..., experimental_run_tf_function=False)
"""

import tensorflow as tf

from tf_hvd._keras import flavors
from tf_hvd._keras.state import HvdState, distributed_subclass


def _reduce_pairs(state, grads_and_vars):
    grads_and_vars = list(grads_and_vars)
    if not grads_and_vars:
        return grads_and_vars
    grads = [g for g, _ in grads_and_vars]
    variables = [v for _, v in grads_and_vars]
    return list(zip(state.compute(grads, variables), variables))


def _prebuild(self, base, variables):
    """Create the optimizer's slots before a conditional apply (variables must
    not be first created inside a tf.cond branch)."""
    with tf.init_scope():
        if flavors.optimizer_kind(self) == flavors.TF_KERAS_LEGACY:
            self._create_all_weights(variables)
        elif not getattr(self, "_built", False):
            self.build(variables)


def distributed_class(base, params, allreduce_name):
    """The distributed subclass of the tf-keras optimizer class ``base``."""
    legacy = issubclass(base, flavors.tf_keras_module().optimizers.legacy.Optimizer)

    def __init__(self, *args, **kwargs):
        base.__init__(self, *args, **kwargs)
        self._hvd = HvdState(params, allreduce_name)

    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        agg = self._hvd.agg_helper
        if agg is None:
            return base.apply_gradients(self, grads_and_vars, *args, **kwargs)
        grads_and_vars = list(grads_and_vars)
        _prebuild(self, base, [v for _, v in grads_and_vars])
        return agg.apply_gradients(
            lambda: base.apply_gradients(self, grads_and_vars, *args, **kwargs),
            grads=[g for g, _ in grads_and_vars])

    namespace = {"__init__": __init__, "apply_gradients": apply_gradients}
    if legacy:
        def _compute_gradients(self, loss, var_list, grad_loss=None, tape=None):
            pairs = base._compute_gradients(self, loss, var_list,
                                            grad_loss=grad_loss, tape=tape)
            return _reduce_pairs(self._hvd, pairs)

        def get_gradients(self, loss, params_):
            grads = base.get_gradients(self, loss, params_)
            return self._hvd.compute(grads, params_)

        namespace["_compute_gradients"] = _compute_gradients
        namespace["get_gradients"] = get_gradients
    else:
        def compute_gradients(self, loss, var_list, tape=None):
            pairs = base.compute_gradients(self, loss, var_list, tape=tape)
            return _reduce_pairs(self._hvd, pairs)

        namespace["compute_gradients"] = compute_gradients
    return distributed_subclass(base, params, **namespace)


def copy_optimizer(optimizer, cls):
    """A new ``cls`` with ``optimizer``'s config; a learning-rate schedule
    object is handed over as it is (not through its serialized config)."""
    config = optimizer.get_config()
    if flavors.optimizer_kind(optimizer) == flavors.TF_KERAS_LEGACY:
        lr = getattr(optimizer, "_hyper", {}).get("learning_rate")
    else:
        lr = getattr(optimizer, "_learning_rate", None)
    if lr is not None and not isinstance(lr, (tf.Variable, float, int)) and (
            not tf.is_tensor(lr)):
        config["learning_rate"] = lr
    return cls.from_config(config)

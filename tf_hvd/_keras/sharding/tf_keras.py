"""The sharded DistributedOptimizer for tf-keras 2 optimizers (``TF_USE_LEGACY_KERAS=1``).

The step of keras3.py, with a tf-keras optimizer's own update: each
rank's slice of the parameters lives in a flat *shard variable*, and the
wrapped class's ``apply_gradients`` (tf-keras' update rule, weight decay,
clipping with the norms over every rank's slice, ``iterations``) updates that
variable only, creating its slots (Adam's ``m`` and ``v``, ...) for the slice::

    import os; os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import tensorflow as tf
    import tf_hvd.keras as hvd

    opt = hvd.DistributedOptimizer(tf.keras.optimizers.Adam(1e-3), sharded=True)
    model.compile(optimizer=opt, loss="mse")   # model.fit: reduce-scatter inside

``model.fit`` calls ``minimize``, whose ``compute_gradients`` (tf-keras' own)
leaves the gradients local; ``apply_gradients`` reduce-scatters them. The shard
variable is a Keras 3 variable (the step's gather and write-back are shared
with Keras 3), and the tf-keras optimizer is built on the tf.Variable it holds.

Supported: ``tf_keras.optimizers`` SGD, Adam, AdamW, Adamax, Nadam, RMSprop,
Adagrad, Adadelta, Ftrl and Lion (the tf-keras >= 2.11 family). Not supported,
with a ShardingError naming the optimizer: the legacy OptimizerV2 family
(``tf_keras.optimizers.legacy.*``), tf-keras' LossScaleOptimizer, ``use_ema``,
``exclude_from_weight_decay``, and an optimizer that has already taken a step.
"""

import numpy as np
import tensorflow as tf

from tf_hvd._keras import flavors
from tf_hvd._keras.sharding import clipping
from tf_hvd._keras.sharded_state.pre_reduced import pre_reduced
from tf_hvd._keras.sharding.methods import make_sharded_class
from tf_hvd._keras.sharding.state import ShardedState
from tf_hvd._keras.sharding.support import (SUPPORTED, check_no_ema,
                                            check_no_weight_decay_exclusions)
from tf_hvd.exceptions import ShardingError


def supported_classes():
    """The tf-keras optimizer classes named in SUPPORTED."""
    optimizers = flavors.tf_keras_module().optimizers
    return tuple(getattr(optimizers, name) for name in SUPPORTED)


def check_supported(optimizer, base=None):
    """Raise ShardingError unless the tf-keras ``optimizer`` (an instance, or
    its class ``base``) can be sharded."""
    cls = base if base is not None else type(optimizer)
    cls = getattr(cls, "_hvd_base", cls)
    if cls not in supported_classes():
        raise ShardingError(
            "DistributedOptimizer(sharded=True) cannot shard the state of %s.%s: with "
            "tf-keras (TF_USE_LEGACY_KERAS=1) it shards tf_keras.optimizers.%s (an "
            "elementwise update; not the legacy OptimizerV2 ones under "
            "tf_keras.optimizers.legacy, nor a LossScaleOptimizer); use sharded=False "
            "for %s" % (cls.__module__, cls.__name__, ", ".join(SUPPORTED), cls.__name__))
    if optimizer is None:
        return
    check_no_ema(optimizer)
    check_no_weight_decay_exclusions(optimizer)


class TfKerasShardedState(ShardedState):
    """ShardedState for a tf-keras optimizer: built on the tf.Variables the shard
    variables hold, its variables kept in ``_variables`` (a plain list)."""

    def optimizer_variables(self):
        return [shard.value for shard in self.shards]

    def new_stand_in(self, i, dtype):
        return tf.Variable(np.zeros([1], dtype=dtype), name="stand_in_%d" % i)

    def forget_build(self, opt, kept):
        # new containers, not edited ones: TensorFlow's tracking refuses to save a
        # list whose elements were removed
        opt._variables = [v for v in opt._variables if id(v) in kept]
        opt._index_dict = {}
        opt.__dict__.pop("_coalesced_children", None)  # tf-keras' cache of the above
        opt._built = False


def sharded_class(base, params, name):
    """A subclass of the tf-keras optimizer class ``base`` whose state is sharded."""

    def __init__(self, *args, **kwargs):
        base.__init__(self, *args, **kwargs)
        check_supported(self, base=base)
        self._hvd_shard = TfKerasShardedState(params, name)

    def build(self, var_list):
        st = self._hvd_shard
        if st.layout is not None:
            return  # tf-keras' apply_gradients calls build with the shard variables
        variables = list(var_list)
        with tf.init_scope():
            st.setup(self, variables)
            st.before_build = [(self, set(id(v) for v in self._variables))]
            base.build(self, st.optimizer_variables())
            st.finish_build(self)

    def apply_gradients(self, grads_and_vars, name=None, **kwargs):
        pairs = [(g, v) for g, v in grads_and_vars]
        if not pairs:
            return self.iterations
        grads = [g for g, _ in pairs]
        variables = [v for _, v in pairs]
        st = self._hvd_shard
        if st.layout is None:
            self.build(variables)
        reduced = pre_reduced(grads, "sharded optimizer")
        dense = st.in_layout_order(grads, variables)

        def step(gradients):
            shard_grads = st.shard_grads(gradients, reduced)
            st.refresh_shards()
            iteration = base.apply_gradients(
                self, list(zip(shard_grads, st.optimizer_variables())), name=name, **kwargs)
            st.write_back()
            return iteration

        if st.agg_helper is None:
            return step(dense)
        aggregated = st.agg_helper.compute_gradients(dense, st.model_vars)
        return st.agg_helper.apply_gradients(lambda: step(aggregated), grads=aggregated)

    def _clip_gradients(self, grads):
        return clipping.clip(self._hvd_shard, self, grads)

    return make_sharded_class(base, params, dict(
        __init__=__init__, build=build, apply_gradients=apply_gradients,
        _clip_gradients=_clip_gradients))


def create_sharded_optimizer(optimizer, cls):
    """A sharded copy of the tf-keras ``optimizer`` (class ``cls`` made by
    sharded_class); ShardingError if it has taken a step already."""
    check_supported(optimizer)
    if flavors.optimizer_built(optimizer):
        raise ShardingError(
            "DistributedOptimizer(sharded=True): this tf-keras %s has built its state "
            "already (it took a step); wrap the optimizer before its first step"
            % type(optimizer).__name__)
    config = optimizer.get_config()
    lr = getattr(optimizer, "_learning_rate", None)
    if lr is not None and not isinstance(lr, (tf.Variable, float, int)) and (
            not tf.is_tensor(lr)):
        config["learning_rate"] = lr
    return cls.from_config(config)

"""The sharded DistributedOptimizer for Keras 3 optimizers: the class (its ``build``,
``apply`` and clipping over Keras 3's own step) and the copy of a user's optimizer::

    cls = sharded_class(keras.optimizers.Adam, params, "DistributedAdam")
    opt = create_sharded_optimizer(keras.optimizers.Adam(1e-3), params, cls)
"""

import tensorflow as tf

from tf_hvd._keras.sharding import clipping, full_state
from tf_hvd._keras.sharded_state.pre_reduced import pre_reduced
from tf_hvd._keras.sharding.methods import make_sharded_class
from tf_hvd._keras.sharding.state import ShardedState
from tf_hvd._keras.sharding.support import SUPPORTED, check_no_ema, updating_optimizer
from tf_hvd._keras.state import build_on_first_apply
from tf_hvd.exceptions import ShardingError


def supported_classes():
    """The Keras 3 optimizer classes named in SUPPORTED."""
    import keras
    return tuple(getattr(keras.optimizers, name) for name in SUPPORTED)


def check_supported(optimizer, base=None):
    """Raise ShardingError unless ``optimizer`` (an instance, or its class
    ``base``) can be sharded."""
    import keras
    cls = base if base is not None else type(optimizer)
    target = optimizer
    if issubclass(cls, keras.optimizers.LossScaleOptimizer):
        target = getattr(optimizer, "inner_optimizer", None)
        cls = type(target) if target is not None else None
        if cls is not None:
            cls = getattr(cls, "_hvd_base", cls)
    if cls is not None and cls not in supported_classes():
        raise ShardingError(
            "DistributedOptimizer(sharded=True) cannot shard the state of %s.%s: "
            "sharding cuts variables into flat slices, which only optimizers with an "
            "elementwise update allow. Supported: keras.optimizers.%s (and a "
            "LossScaleOptimizer around one of them); use sharded=False for %s."
            % (cls.__module__, cls.__name__, ", ".join(SUPPORTED), cls.__name__))
    if target is None:
        return
    check_no_ema(target)
    if getattr(target, "gradient_accumulation_steps", None):
        raise ShardingError(
            "DistributedOptimizer(sharded=True): gradient_accumulation_steps is not "
            "supported; use backward_passes_per_step=%d (accumulates before the "
            "reduce-scatter)" % target.gradient_accumulation_steps)


def sharded_class(base, params, name):
    """A subclass of the Keras 3 optimizer class ``base`` whose state is sharded."""
    import keras
    is_lso = issubclass(base, keras.optimizers.LossScaleOptimizer)

    def __init__(self, *args, **kwargs):
        base.__init__(self, *args, **kwargs)
        inner = getattr(self, "inner_optimizer", None)
        if inner is not None and getattr(type(inner), "_hvd_distributed", False):
            # A LossScaleOptimizer deserialized by load_model(sharded=True) got a
            # wrapped inner optimizer: the sharding happens here, once.
            inner.__class__ = type(inner)._hvd_base
        check_supported(self, base=base)
        self._hvd_shard = ShardedState(params, name)

    def build(self, variables):
        st = self._hvd_shard
        if st.layout is not None:
            return
        variables = list(variables)
        with tf.init_scope():
            st.setup(self, variables)
            inner = getattr(self, "inner_optimizer", None)
            if inner is not None:
                inner._hvd_shard = st
                if not getattr(type(inner), "_hvd_sharded_clip", False):
                    inner.__class__ = _clip_subclass(type(inner))
            st.before_build = [(opt, set(id(v) for v in opt._variables))
                               for opt in (self, inner) if opt is not None]
            base.build(self, st.shards)
            st.finish_build(self)

    def apply(self, grads, trainable_variables=None):
        grads = list(grads)
        if not grads:
            return
        st = self._hvd_shard
        if trainable_variables is None:
            if not self.built:
                return base.apply(self, grads, trainable_variables)  # Keras' error
            variables = st.model_vars[:len(grads)]
        else:
            variables = list(trainable_variables)
            build_on_first_apply(self, variables)
        reduced = pre_reduced(grads, "sharded optimizer")
        dense = st.in_layout_order(grads, variables)

        def step(gradients):
            shard_grads = st.shard_grads(gradients, reduced)
            st.refresh_shards()
            base.apply(self, shard_grads, st.shards)
            st.write_back()

        if st.agg_helper is None:
            return step(dense)
        aggregated = st.agg_helper.compute_gradients(dense, st.model_vars)
        st.agg_helper.apply_gradients(lambda: step(aggregated), grads=aggregated)

    def _clip_gradients(self, grads):
        return clipping.clip(self._hvd_shard, self, grads)

    def check_finite(self, grads):
        return clipping.all_finite(self._hvd_shard, base.check_finite(self, grads))

    methods = dict(__init__=__init__, build=build, apply=apply,
                   _clip_gradients=_clip_gradients)
    if is_lso:
        methods["check_finite"] = check_finite
        del methods["_clip_gradients"]
    return make_sharded_class(base, params, methods)


_CLIP_CLASSES = {}


def _clip_subclass(cls):
    """``cls`` whose clipping uses the norms over all shards (for the inner
    optimizer of a sharded LossScaleOptimizer)."""
    made = _CLIP_CLASSES.get(cls)
    if made is None:
        def _clip_gradients(self, grads):
            return clipping.clip(self._hvd_shard, self, grads)
        made = type(cls.__name__, (cls,), {
            "_clip_gradients": _clip_gradients, "_hvd_sharded_clip": True,
            "_hvd_base": getattr(cls, "_hvd_base", cls),
            "__module__": cls.__module__, "__doc__": cls.__doc__,
            "__qualname__": getattr(cls, "__qualname__", cls.__name__)})
        _CLIP_CLASSES[cls] = made
    return made


def create_sharded_optimizer(optimizer, params, cls):
    """A sharded copy of the Keras 3 ``optimizer`` (class ``cls`` made by
    sharded_class); an optimizer that was built hands its state over."""
    import keras
    check_supported(optimizer)
    config = optimizer.get_config()
    target = updating_optimizer(optimizer)
    lr = getattr(target, "_learning_rate", None)
    if target is optimizer and ("learning_rate" in config and lr is not None
                                and not isinstance(lr, keras.Variable)):
        config["learning_rate"] = lr
    new = cls.from_config(config)
    if optimizer.built:
        values = [v.numpy() for v in optimizer.variables]
        new.build(list(optimizer._trainable_variables))
        new.built = True
        full_state.load(new._hvd_shard, new, values)
    return new

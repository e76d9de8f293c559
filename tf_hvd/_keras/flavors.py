"""Which Keras an object belongs to: Keras 3 (``keras``) or tf-keras 2 (``tf_keras``).

TensorFlow 2.21 ships Keras 3 as ``tf.keras``; with the ``tf-keras`` package
installed and ``TF_USE_LEGACY_KERAS=1`` set before TensorFlow is imported,
``tf.keras`` is tf-keras 2 instead (the Keras most Horovod scripts were written
for). tf_hvd.keras takes objects of either kind; this module tells them apart
without importing tf_keras when the process never did.

    >>> from tf_hvd._keras import flavors
    >>> flavors.optimizer_kind(keras.optimizers.Adam())  # doctest: +SKIP
    'keras3'
    >>> flavors.optimizer_kind(tf_keras.optimizers.legacy.Adam())  # doctest: +SKIP
    'tf_keras_legacy'
"""

import os
import sys

from tf_hvd.sharded_rows import holds_sharded_state

KERAS3 = "keras3"
TF_KERAS = "tf_keras"                 # tf_keras.optimizers.Optimizer (Keras >= 2.11)
TF_KERAS_LEGACY = "tf_keras_legacy"   # tf_keras.optimizers.legacy.Optimizer (OptimizerV2)


def legacy_keras_requested():
    """True when ``tf.keras`` is tf-keras 2 (TensorFlow's own test of the variable)."""
    return os.environ.get("TF_USE_LEGACY_KERAS", None) in ("true", "True", "1")


def tf_keras_module():
    """The ``tf_keras`` package, with a clear error if it is not installed."""
    try:
        import tf_keras
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "TF_USE_LEGACY_KERAS is set, so tf.keras is tf-keras 2, but the "
            "tf-keras package is not installed (pip install tf-keras==2.21.0): %s"
            % (e,))
    return tf_keras


def default_keras():
    """The Keras module that ``tf.keras`` stands for in this process."""
    if legacy_keras_requested():
        return tf_keras_module()
    import keras
    return keras


def _tf_keras_loaded():
    return "tf_keras" in sys.modules


def is_tf_keras(obj):
    """Whether ``obj`` (an instance or a class) comes from tf-keras 2."""
    cls = obj if isinstance(obj, type) else type(obj)
    return any(k.__module__.startswith("tf_keras.") for k in cls.__mro__)


def optimizer_kind(optimizer):
    """``KERAS3``, ``TF_KERAS``, ``TF_KERAS_LEGACY`` or None (not a Keras optimizer)."""
    if _tf_keras_loaded() and is_tf_keras(optimizer):
        import tf_keras
        if isinstance(optimizer, tf_keras.optimizers.legacy.Optimizer):
            return TF_KERAS_LEGACY
        if isinstance(optimizer, tf_keras.optimizers.Optimizer):
            return TF_KERAS
        return None
    import keras
    if isinstance(optimizer, keras.optimizers.Optimizer):
        return KERAS3
    return None


def optimizer_variables(optimizer):
    """The optimizer's variables as a list, whichever Keras it is from
    (``variables`` is a list in Keras 3, a method in OptimizerV2 and a
    callable list in tf-keras' new optimizers)."""
    if optimizer is None:
        return []
    variables = optimizer.variables
    if callable(variables) and not isinstance(variables, (list, tuple)):
        variables = variables()
    return list(variables)


def optimizer_built(optimizer):
    """Whether the optimizer has created its state (slots) yet."""
    if optimizer_kind(optimizer) == TF_KERAS_LEGACY:
        return bool(optimizer.weights)
    return bool(getattr(optimizer, "built", False)) or bool(
        getattr(optimizer, "_built", False))


def replicated_optimizer_variables(optimizer):
    """The optimizer variables that every rank holds in full: all of them,
    except for a sharded DistributedOptimizer, whose slots are each rank's own
    slice (then only iterations, learning rate, loss scale)."""
    if holds_sharded_state(optimizer):
        return list(optimizer.replicated_variables())
    return optimizer_variables(optimizer)


def model_and_optimizer_variables(model):
    """The model's variables and, once built, its optimizer's (those every rank
    holds in full: what a broadcast from one rank may overwrite)."""
    variables = list(model.variables)
    opt = getattr(model, "optimizer", None)
    if opt is not None and not isinstance(opt, str) and optimizer_built(opt):
        variables += replicated_optimizer_variables(opt)
    return variables

"""Which optimizers and options can be sharded, in both Kerases.

Sharding cuts variables into flat slices, which only an elementwise update allows (the
update of one element depends only on that element's gradient, slots and the step): the
classes named in ``SUPPORTED``, of Keras 3 (keras3.py) or of tf-keras (tf_keras.py).
Each check raises a ShardingError naming the option and what to do instead::

    check_no_ema(keras.optimizers.Adam(use_ema=True))      # ShardingError
"""

from tf_hvd.exceptions import ShardingError

SUPPORTED = ("SGD", "Adam", "AdamW", "Adamax", "Nadam", "RMSprop", "Adagrad",
             "Adadelta", "Ftrl", "Lion")


def updating_optimizer(optimizer):
    """The optimizer whose update rule runs (a LossScaleOptimizer's inner one)."""
    inner = getattr(optimizer, "inner_optimizer", None)
    return inner if inner is not None else optimizer


def check_no_ema(optimizer):
    """ShardingError if ``optimizer`` keeps moving averages of its variables."""
    if getattr(optimizer, "use_ema", False):
        raise ShardingError(
            "DistributedOptimizer(sharded=True): use_ema=True is not supported (the "
            "moving averages would be kept of the flat shard, not of the model's "
            "variables); use sharded=False or drop use_ema")


def check_no_weight_decay_exclusions(optimizer):
    """ShardingError if the updating optimizer decays weights but exempts some
    variables (Keras 3 keeps them in ``_exclude_from_weight_decay`` and ``..._pattern``,
    tf-keras in ``_exclude_from_weight_decay`` and ``..._names``)."""
    target = updating_optimizer(optimizer)
    if getattr(target, "weight_decay", None) and (
            getattr(target, "_exclude_from_weight_decay", None)
            or getattr(target, "_exclude_from_weight_decay_pattern", None) is not None
            or getattr(target, "_exclude_from_weight_decay_names", None)):
        raise ShardingError(
            "DistributedOptimizer(sharded=True): exclude_from_weight_decay is not "
            "supported (weight decay applies to the flat shard as a whole); use "
            "sharded=False, or weight_decay=None with the decay in the loss")

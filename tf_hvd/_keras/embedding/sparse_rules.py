"""Optimizer updates of a sharded table's rows: only the rows a step touched change.

Each rule is the Keras 3 optimizer's own update written for a set of rows
(gathered, updated with Keras' formula in Keras' order of operations, and
scattered back), so a row in the batch changes exactly as Keras would change
it, and a row not in the batch keeps its value and its slots. That is TF's
and keras-rs' sparse semantics: "lazy" Adam (momentum and velocity of absent
rows do not decay), FTRL that leaves absent rows alone. SGD (with momentum and
Nesterov), Adagrad, Adam (with amsgrad) and Ftrl; any other optimizer is a
ShardingError naming it::

    rule = rule_for(keras.optimizers.Adam(1e-3), "items")
    rule.slot_names            # ("momentum", "velocity")
    rule.apply(table, slots, rows, row_grads, learning_rate, iterations)
"""

import tensorflow as tf

from tf_hvd.exceptions import ShardingError

SUPPORTED = ("SGD", "Adagrad", "Adam", "Ftrl")


def _base_class(optimizer):
    cls = type(optimizer)
    return getattr(cls, "_hvd_base", cls)


def _scatter(variable, rows, values):
    variable = getattr(variable, "value", variable)
    variable.scatter_update(tf.IndexedSlices(values, rows))


def _gather(variable, rows):
    return tf.gather(tf.convert_to_tensor(variable), rows)


class SGDRule(object):
    def __init__(self, opt):
        self.momentum = float(opt.momentum)
        self.nesterov = bool(opt.nesterov)
        self.slot_names = ("momentum",) if self.momentum != 0 else ()

    def initial(self, name):
        return 0.0

    def apply(self, var, slots, rows, g, lr, step):
        w = _gather(var, rows)
        if not self.slot_names:
            _scatter(var, rows, w - g * lr)
            return
        momentum = tf.cast(self.momentum, w.dtype)
        m = _gather(slots["momentum"], rows) * momentum - g * lr
        _scatter(slots["momentum"], rows, m)
        if self.nesterov:
            _scatter(var, rows, w + (m * momentum - g * lr))
        else:
            _scatter(var, rows, w + m)


class AdagradRule(object):
    slot_names = ("accumulator",)

    def __init__(self, opt):
        self.initial_accumulator_value = float(opt.initial_accumulator_value)
        self.epsilon = float(opt.epsilon)

    def initial(self, name):
        return self.initial_accumulator_value

    def apply(self, var, slots, rows, g, lr, step):
        acc = _gather(slots["accumulator"], rows) + tf.square(g)
        _scatter(slots["accumulator"], rows, acc)
        w = _gather(var, rows)
        _scatter(var, rows, w - (lr * g) / tf.sqrt(acc + self.epsilon))


class AdamRule(object):
    def __init__(self, opt):
        self.beta_1 = float(opt.beta_1)
        self.beta_2 = float(opt.beta_2)
        self.epsilon = float(opt.epsilon)
        self.amsgrad = bool(opt.amsgrad)
        self.slot_names = ("momentum", "velocity") + (("velocity_hat",) if self.amsgrad else ())

    def initial(self, name):
        return 0.0

    def apply(self, var, slots, rows, g, lr, step):
        dtype = g.dtype
        local_step = tf.cast(step + 1, dtype)
        beta_1_power = tf.pow(tf.cast(self.beta_1, dtype), local_step)
        beta_2_power = tf.pow(tf.cast(self.beta_2, dtype), local_step)
        alpha = lr * tf.sqrt(1 - beta_2_power) / (1 - beta_1_power)
        m = _gather(slots["momentum"], rows)
        v = _gather(slots["velocity"], rows)
        m = m + (g - m) * (1 - self.beta_1)
        v = v + (tf.square(g) - v) * (1 - self.beta_2)
        _scatter(slots["momentum"], rows, m)
        _scatter(slots["velocity"], rows, v)
        if self.amsgrad:
            v = tf.maximum(_gather(slots["velocity_hat"], rows), v)
            _scatter(slots["velocity_hat"], rows, v)
        w = _gather(var, rows)
        _scatter(var, rows, w - (m * alpha) / (tf.sqrt(v) + self.epsilon))


class FtrlRule(object):
    slot_names = ("accumulator", "linear")

    def __init__(self, opt):
        self.lr_power = float(opt.learning_rate_power)
        self.l1 = float(opt.l1_regularization_strength)
        self.l2 = float(opt.l2_regularization_strength)
        self.l2_shrinkage = float(opt.l2_shrinkage_regularization_strength)
        self.beta = float(opt.beta)
        self.initial_accumulator_value = float(opt.initial_accumulator_value)

    def initial(self, name):
        return self.initial_accumulator_value if name == "accumulator" else 0.0

    def apply(self, var, slots, rows, g, lr, step):
        w = _gather(var, rows)
        accum = _gather(slots["accumulator"], rows)
        linear = _gather(slots["linear"], rows)
        l2_reg = self.l2 + self.beta / (2.0 * lr)
        grad_to_use = g + 2 * self.l2_shrinkage * w
        new_accum = accum + tf.square(g)
        linear = linear + (grad_to_use - ((tf.pow(new_accum, -self.lr_power)
                                           - tf.pow(accum, -self.lr_power)) / lr) * w)
        quadratic = tf.pow(new_accum, -self.lr_power) / lr + 2 * l2_reg
        clipped = tf.clip_by_value(linear, -self.l1, self.l1)
        _scatter(slots["linear"], rows, linear)
        _scatter(var, rows, (clipped - linear) / quadratic)
        _scatter(slots["accumulator"], rows, new_accum)


_RULES = {"SGD": SGDRule, "Adagrad": AdagradRule, "Adam": AdamRule, "Ftrl": FtrlRule}


def rule_for(optimizer, table_name):
    """The sparse rule for ``optimizer`` (a Keras 3 optimizer, plain or
    DistributedOptimizer) updating table ``table_name``; ShardingError naming the
    optimizer (and what to do) if its update cannot be applied to rows alone."""
    import keras
    cls = _base_class(optimizer)
    name = cls.__name__
    if getattr(keras.optimizers, name, None) is not cls or name not in _RULES:
        raise ShardingError(
            "DistributedEmbedding table '%s': %s.%s cannot update sharded rows (its "
            "update is not one of the sparse rules: keras.optimizers.%s). Give the "
            "table an optimizer of its own (TableConfig(optimizer=...)) or train with "
            "one of those." % (table_name, cls.__module__, name, ", ".join(SUPPORTED)))
    for attr, what in (("weight_decay", "weight_decay"), ("clipnorm", "clipnorm"),
                       ("global_clipnorm", "global_clipnorm"), ("use_ema", "use_ema"),
                       ("gradient_accumulation_steps", "gradient_accumulation_steps")):
        if getattr(optimizer, attr, None):
            raise ShardingError(
                "DistributedEmbedding table '%s': %s with %s=%r cannot update sharded "
                "rows (it needs every row or every rank's gradients); give the table "
                "an optimizer of its own (TableConfig(optimizer=...))"
                % (table_name, name, what, getattr(optimizer, attr)))
    return _RULES[name](optimizer)

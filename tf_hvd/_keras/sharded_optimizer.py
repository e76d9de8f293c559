"""The sharded DistributedOptimizer for Keras 3 (``DistributedOptimizer(opt, sharded=True)``).

Each rank keeps the optimizer's slots (Adam's momentum and velocity, SGD's
momentum, ...) for its slice of the parameters only (ZeRO stage 1). A step:

1. the gradients of one dtype are laid end to end and ``hvd.reducescatter``
   averages them, each rank receiving the averaged gradient of its slice
   (shard_layout.py says which slice);
2. the rank's *shard variable* (a flat copy of its slice of the parameters,
   refreshed from the model's variables at every step) is updated by the
   wrapped optimizer class's own ``apply``: Keras' update rule, weight decay,
   loss scaling and ``iterations`` as usual, on 1/N of the elements;
3. every rank gets the updated parameters (``hvd.allgather`` of the slices),
   which are written back into the model's variables.

The two collectives move the bytes of one allreduce: the core's reduce-scatter
and allgather move only the slices (a ring over the network, shared memory on
one host).

The extra work is local copies (the gradients concatenated, the slice
refreshed, the gathered parameters split back), and the extra memory is the
shard variable (1/N of the parameters) plus the flat gradients and
parameters during the step.

Clipping: ``clipnorm`` (per variable) and ``global_clipnorm`` are computed over
every rank's shard (a tiny allreduce of the squared norms), so they equal the
unsharded optimizer's; ``clipvalue`` is elementwise. With a
``LossScaleOptimizer`` the finiteness check is agreed by all ranks (allreduce
Min), so every rank skips or applies the same steps.

Checkpoints: the optimizer saves and loads the state an *unsharded* optimizer
of the same class would hold (an ordinary Keras checkpoint), so a checkpoint
restores at any number of ranks, sharded or not; see ``gather_state``.
"""

import numpy as np
import tensorflow as tf

from tf_hvd import ops, topology
from tf_hvd._keras.shard_layout import ShardLayout, mismatch_message
from tf_hvd._keras.state import build_on_first_apply, var_key
from tf_hvd.allreduce_grads import _scale_factors
from tf_hvd.functions import allgather_object
from tf_hvd.gradient_aggregation import (LocalGradientAggregationHelper,
                                         LocalGradientAggregationHelperEager)
from tf_hvd.process_sets import _process_set_id, _set_rank_size
from tf_hvd.reduce_ops import REDUCE_OP_NAMES, Average, Min, Sum
from tf_hvd.tape import REDUCED_MARK

# Keras 3 optimizers whose update is elementwise (the update of one element
# depends only on that element's gradient, slots and the step), so that they
# give the same result on a flat slice as on the whole variables.
SUPPORTED = ("SGD", "Adam", "AdamW", "Adamax", "Nadam", "RMSprop", "Adagrad",
             "Adadelta", "Ftrl", "Lion")


def supported_classes():
    import keras
    return tuple(getattr(keras.optimizers, name) for name in SUPPORTED)


class ShardingError(ValueError):
    """The sharded optimizer cannot run as asked (an unsupported optimizer or
    option, variables that differ across ranks, an incompatible checkpoint)."""


def _updating_optimizer(optimizer):
    """The optimizer whose update rule runs (a LossScaleOptimizer's inner one)."""
    inner = getattr(optimizer, "inner_optimizer", None)
    return inner if inner is not None else optimizer


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
    if getattr(target, "use_ema", False):
        raise ShardingError(
            "DistributedOptimizer(sharded=True): use_ema=True is not supported (the "
            "moving averages would be kept of the flat shard, not of the model's "
            "variables); use sharded=False or drop use_ema")
    if getattr(target, "gradient_accumulation_steps", None):
        raise ShardingError(
            "DistributedOptimizer(sharded=True): gradient_accumulation_steps is not "
            "supported; use backward_passes_per_step=%d (accumulates before the "
            "reduce-scatter)" % target.gradient_accumulation_steps)


def _check_no_weight_decay_exclusions(optimizer):
    target = _updating_optimizer(optimizer)
    if getattr(target, "weight_decay", None) and (
            getattr(target, "_exclude_from_weight_decay", None)
            or getattr(target, "_exclude_from_weight_decay_pattern", None) is not None):
        raise ShardingError(
            "DistributedOptimizer(sharded=True): exclude_from_weight_decay is not "
            "supported (weight decay applies to the flat shard as a whole); use "
            "sharded=False, or weight_decay=None with the decay in the loss")


def _record_references(optimizer, records):
    """Make ``optimizer`` (and a LossScaleOptimizer's inner one) record, for
    every variable made from a reference, ``id(slot) -> (reference, name)``."""
    for opt in (optimizer, getattr(optimizer, "inner_optimizer", None)):
        if opt is None or "add_variable_from_reference" in vars(opt):
            continue
        original = opt.add_variable_from_reference

        def recording(*args, _original=original, **kwargs):
            slot = _original(*args, **kwargs)
            # Keras 3: (reference_variable, name), tf-keras: (model_variable, variable_name)
            reference = args[0] if args else kwargs.get(
                "reference_variable", kwargs.get("model_variable"))
            name = args[1] if len(args) > 1 else kwargs.get(
                "name", kwargs.get("variable_name"))
            records[id(slot)] = (reference, name or "var")
            return slot
        object.__setattr__(opt, "add_variable_from_reference", recording)


def _structure(optimizer, references, records):
    """The optimizer's variables as keys: ``("slot", reference index, name)``
    for a variable made from ``references[index]``, ``("own", k)`` for the
    k-th other one (iterations, learning_rate, a LossScaleOptimizer's scale,
    Nadam's u_product)."""
    index = dict((id(r), i) for i, r in enumerate(references))
    keys, own = [], 0
    for v in optimizer.variables:
        rec = records.get(id(v))
        if rec is not None and id(rec[0]) in index:
            keys.append(("slot", index[id(rec[0])], rec[1]))
        else:
            keys.append(("own", own))
            own += 1
    return keys


class ShardedState(object):
    """Per-instance state of a sharded optimizer, in one plain attribute (Keras'
    variable tracking does not look inside)."""

    def __init__(self, params, name):
        if params.op not in (Average, Sum):
            raise ShardingError(
                "DistributedOptimizer(sharded=True) reduces with reducescatter, which "
                "takes op=hvd.Average or hvd.Sum, not %s" % REDUCE_OP_NAMES[params.op])
        if params.groups:
            raise ShardingError(
                "DistributedOptimizer(sharded=True) takes no groups/num_groups: the "
                "gradients of one dtype always travel as one reduce-scatter")
        self.params = params
        self.name = name
        self.set_id = _process_set_id(params.process_set)
        self.op, self.prescale, self.postscale = _scale_factors(
            params.op, params.gradient_predivide_factor)
        self.layout = None
        self.model_vars = []
        self.keys = {}
        self.shards = []
        self.rank, self.size = 0, 1
        self.records = {}
        self.slot_keys = None      # optimizer.variables as _structure keys
        self.plain_keys = None     # the unsharded optimizer's variables, same keys
        self.pending = None        # (iterations, values) gathered for a save
        self.before_build = []     # (optimizer, ids of its variables before build)
        self.agg_helper = None
        if params.backward_passes_per_step > 1:
            helper = (LocalGradientAggregationHelperEager if tf.executing_eagerly()
                      else LocalGradientAggregationHelper)
            self.agg_helper = helper(
                params.backward_passes_per_step, lambda grads, variables: list(grads),
                sparse_as_dense=True,
                average_aggregated_gradients=params.average_aggregated_gradients,
                name=name + "_aggregation")

    # -- building ----------------------------------------------------------
    def setup(self, optimizer, variables):
        """Lay out ``variables`` (the model's trainable variables), check that
        every rank has the same ones, and make the shard variables."""
        import keras
        _check_no_weight_decay_exclusions(optimizer)
        self.rank, self.size = _set_rank_size(self.set_id)
        described = []
        for v in variables:
            name = getattr(v, "path", None) or getattr(v, "name", "?")
            described.append((name, tuple(v.shape), tf.as_dtype(v.dtype).name))
        layout = ShardLayout(described, self.size)
        if self.size > 1:
            everyone = allgather_object(
                (layout.signature(), [d[0] for d in described]),
                name="%s.sharded_layout" % self.name,
                process_set=self.params.process_set)
            message = mismatch_message([e[0] for e in everyone], [e[1] for e in everyone],
                                       self._set_ranks())
            if message:
                raise ShardingError(message)
        self.layout = layout
        self.model_vars = list(variables)
        self.keys = dict((var_key(v), i) for i, v in enumerate(self.model_vars))
        self.shards = [
            keras.Variable(np.zeros([g.shard_size(self.rank)], dtype=g.dtype),
                           dtype=g.dtype, trainable=True,
                           name="hvd_shard_%s" % g.dtype)
            for g in layout.groups]
        _record_references(optimizer, self.records)

    def _set_ranks(self):
        ps = self.params.process_set
        if ps is None or self.set_id == 0 or not getattr(ps, "ranks", None):
            return list(range(self.size))
        return list(ps.ranks)

    def optimizer_variables(self):
        """What the wrapped optimizer is built on and updates: the shards."""
        return self.shards

    def new_stand_in(self, i, dtype):
        """A one-element variable standing in for model variable ``i``."""
        import keras
        return keras.Variable(np.zeros([1], dtype=dtype), name="stand_in_%d" % i)

    def forget_build(self, opt, kept):
        """Drop the variables ``opt`` made when it was built (all but ``kept``)."""
        for v in [v for v in opt._variables if id(v) not in kept]:
            opt._untrack_variable(v)
        opt._trainable_variables_indices.clear()
        opt.built = False

    def finish_build(self, optimizer):
        self.slot_keys = _structure(optimizer, self.optimizer_variables(), self.records)

    def unbuild(self):
        """Drop the layout, the shards and the variables the optimizer (and a
        LossScaleOptimizer's inner one) made when it was built, so that it builds
        again for the ranks as they are now; iterations and learning rate stay."""
        for opt, kept in self.before_build:
            self.forget_build(opt, kept)
        self.layout, self.shards, self.keys = None, [], {}
        self.records.clear()
        self.slot_keys, self.pending, self.before_build = None, None, []

    # -- one step ----------------------------------------------------------
    def in_layout_order(self, grads, variables):
        """The gradients in build order, dense, zeros where there is none."""
        out = [None] * len(self.model_vars)
        for g, v in zip(grads, variables):
            i = self.keys.get(var_key(v))
            if i is None:
                raise ShardingError(
                    "sharded optimizer: variable '%s' is not one the optimizer was "
                    "built on; a sharded optimizer updates the variables of its first "
                    "apply()/build() only" % (getattr(v, "path", None) or v.name))
            if isinstance(g, tf.IndexedSlices):
                g = tf.convert_to_tensor(g)
            out[i] = g
        for i, g in enumerate(out):
            if g is None:
                v = self.model_vars[i]
                out[i] = tf.zeros(v.shape, dtype=v.dtype)
        return out

    def shard_grads(self, grads, pre_reduced):
        """Each group's gradients flattened and reduce-scattered (or, already
        averaged by a DistributedGradientTape, just sliced)."""
        out = []
        for k, group in enumerate(self.layout.groups):
            flat = tf.concat([tf.reshape(tf.cast(grads[i], group.dtype), [-1])
                              for i in group.members], 0)
            if pre_reduced or self.size == 1:
                start, end = group.bounds(self.rank)
                out.append(flat[start:end])
                continue
            out.append(ops.reducescatter(
                flat, device_dense=self.params.device_dense,
                compression=self.params.compression, op=self.op,
                prescale_factor=self.prescale, postscale_factor=self.postscale,
                name="%s_shard_grads_%d" % (self.name, k), ignore_name_scope=True,
                process_set=self.params.process_set))
        return out

    def _slice_of(self, values, k):
        """Rank's slice of group k from per-variable tensors (or numpy arrays)."""
        group = self.layout.groups[k]
        parts = [tf.reshape(values[p.var], [-1])[p.lo:p.hi]
                 for p in group.pieces(self.rank)]
        if not parts:
            return tf.zeros([0], dtype=group.dtype)
        return parts[0] if len(parts) == 1 else tf.concat(parts, 0)

    def refresh_shards(self):
        """Copy the model's current values of the rank's slices into the shards
        (so that weights set from outside, e.g. a broadcast, are picked up)."""
        for k, shard in enumerate(self.shards):
            shard.assign(self._slice_of(self.model_vars, k))

    def write_back(self):
        """Allgather the updated shards into the model's variables."""
        for k, (group, shard) in enumerate(zip(self.layout.groups, self.shards)):
            if self.size == 1:
                full = tf.convert_to_tensor(shard.value)
            else:
                full = ops.allgather(shard.value, name="%s_shard_params_%d" % (self.name, k),
                                     ignore_name_scope=True,
                                     process_set=self.params.process_set)
            pieces = tf.split(full, group.sizes) if len(group.sizes) > 1 else [full]
            for i, piece in zip(group.members, pieces):
                v = self.model_vars[i]
                v.assign(tf.reshape(piece, v.shape))

    # -- clipping over every shard -----------------------------------------
    def clip(self, optimizer, grads):
        """Keras' clipping of the shard gradients, with norms over all ranks."""
        clipnorm = optimizer.clipnorm
        global_clipnorm = optimizer.global_clipnorm
        if clipnorm and clipnorm > 0:
            return self._clip_per_variable(grads, clipnorm)
        if global_clipnorm and global_clipnorm > 0:
            squares = [tf.reduce_sum(tf.square(tf.cast(g, tf.float32))) for g in grads]
            total = self._sum_over_ranks(tf.add_n(squares), "global_norm")
            norm = tf.sqrt(total)
            scale = global_clipnorm * tf.minimum(1.0 / norm, 1.0 / global_clipnorm)
            scale = scale + (norm - norm)
            return [g * tf.cast(scale, g.dtype) for g in grads]
        if optimizer.clipvalue and optimizer.clipvalue > 0:
            c = optimizer.clipvalue
            return [tf.clip_by_value(g, -c, c) for g in grads]
        return grads

    def _sum_over_ranks(self, value, what):
        if self.size == 1:
            return value
        return ops.allreduce(value, op=Sum, name="%s_clip_%s" % (self.name, what),
                             ignore_name_scope=True, process_set=self.params.process_set)

    def _clip_per_variable(self, grads, clipnorm):
        count = len(self.model_vars)
        sums = [tf.zeros([], tf.float32) for _ in range(count)]
        for k, group in enumerate(self.layout.groups):
            for p in group.pieces(self.rank):
                part = grads[k][p.at:p.at + p.hi - p.lo]
                sums[p.var] = sums[p.var] + tf.reduce_sum(tf.square(tf.cast(part, tf.float32)))
        l2sum = self._sum_over_ranks(tf.stack(sums), "norms")
        safe = tf.where(l2sum > 0, l2sum, tf.ones_like(l2sum))
        l2norm = tf.where(l2sum > 0, tf.sqrt(safe), l2sum)
        denom = tf.maximum(l2norm, clipnorm)
        out = []
        for k, group in enumerate(self.layout.groups):
            parts = []
            for p in group.pieces(self.rank):
                part = grads[k][p.at:p.at + p.hi - p.lo]
                parts.append(part * tf.cast(clipnorm, part.dtype)
                             / tf.cast(denom[p.var], part.dtype))
            out.append(tf.concat(parts, 0) if parts else grads[k])
        return out

    def all_finite(self, finite):
        """A LossScaleOptimizer's finiteness check agreed by every rank."""
        if self.size == 1:
            return finite
        agreed = ops.allreduce(tf.cast(finite, tf.int32), op=Min,
                               name="%s_all_finite" % self.name, ignore_name_scope=True,
                               process_set=self.params.process_set)
        return tf.cast(agreed, tf.bool)

    # -- the unsharded view (checkpoints) ----------------------------------
    def plain_structure(self, optimizer):
        """The keys of the variables an unsharded optimizer of this class, built
        on the model's variables, would have (learnt by building one on
        one-element stand-ins)."""
        if self.plain_keys is None:
            plain_cls = type(optimizer)._hvd_base
            with tf.init_scope():
                plain = plain_cls.from_config(optimizer.get_config())
                records = {}
                _record_references(plain, records)
                stand_ins = [self.new_stand_in(i, tf.as_dtype(v.dtype).name)
                             for i, v in enumerate(self.model_vars)]
                plain.build(stand_ins)
                self.plain_keys = _structure(plain, stand_ins, records)
        return self.plain_keys

    def _slot_by_key(self, optimizer):
        """{(group, name): shard slot variable} and the list of own variables."""
        slots, own = {}, []
        for key, v in zip(self.slot_keys, optimizer.variables):
            if key[0] == "slot":
                slots[(key[1], key[2])] = v
            else:
                own.append(v)
        return slots, own

    def describe(self, key):
        if key[0] == "own":
            return "optimizer variable %d of its own (iterations, learning_rate, ...)" % key[1]
        return "slot '%s' of trainable variable '%s'" % (
            key[2], self.layout.variables[key[1]][0])

    def expected_shape(self, optimizer, key, own):
        if key[0] == "own":
            return tuple(own[key[1]].shape)
        return self.layout.variables[key[1]][1]

    def gather_full(self, optimizer, root_rank):
        """Every unsharded variable's value, on ``root_rank`` (None elsewhere).
        Collective over the optimizer's ranks."""
        plain = self.plain_structure(optimizer)
        slots, own = self._slot_by_key(optimizer)
        gathered = {}
        for (k, name), slot in sorted(slots.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            if self.size == 1:
                flat = slot.numpy()
            else:
                flat = ops.allgather(tf.convert_to_tensor(slot),
                                     name="%s_gather_state_%d_%s" % (self.name, k, name),
                                     ignore_name_scope=True,
                                     process_set=self.params.process_set)
                flat = flat.numpy() if self._is_root(root_rank) else None
            gathered[(k, name)] = flat
        if not self._is_root(root_rank):
            return None
        values = []
        for key in plain:
            if key[0] == "own":
                values.append(own[key[1]].numpy())
                continue
            _, i, name = key
            g, pos = self.layout.group_of[i]
            group = self.layout.groups[g]
            flat = gathered[(g, name)]
            off, size = group.offsets[pos], group.sizes[pos]
            values.append(flat[off:off + size].reshape(self.layout.variables[i][1]))
        return values

    def _is_root(self, root_rank):
        """Whether this rank gets the state (root_rank None: every rank does)."""
        return root_rank is None or self.size == 1 or topology.rank() == int(root_rank)

    def broadcast_full(self, optimizer, values, root_rank):
        """``root_rank``'s ``values`` (an unsharded state, as gather_full gives it;
        ignored elsewhere) on every rank, one broadcast per dtype. Collective."""
        plain = self.plain_structure(optimizer)
        slots, own = self._slot_by_key(optimizer)
        specs = []
        for key in plain:
            if key[0] == "own":
                v = own[key[1]]
                specs.append((tuple(v.shape), np.dtype(tf.as_dtype(v.dtype).as_numpy_dtype)))
            else:
                g, _ = self.layout.group_of[key[1]]
                dtype = tf.as_dtype(slots[(g, key[2])].dtype).as_numpy_dtype
                specs.append((self.layout.variables[key[1]][1], np.dtype(dtype)))
        mine = self.size == 1 or topology.rank() == int(root_rank)
        if mine and len(values) != len(specs):
            raise ShardingError(
                "broadcasting the optimizer state: rank %d has %d optimizer variables, "
                "but a %s built on these %d trainable variables has %d"
                % (topology.rank(), len(values), type(optimizer)._hvd_base.__name__,
                   len(self.model_vars), len(specs)))
        arrays = [np.asarray(values[j], dtype) if mine else np.zeros(shape, dtype)
                  for j, (shape, dtype) in enumerate(specs)]
        if self.size == 1:
            return arrays
        by_dtype = {}
        for j, a in enumerate(arrays):
            by_dtype.setdefault(a.dtype.name, []).append(j)
        out = list(arrays)
        for name, members in sorted(by_dtype.items()):
            flat = np.concatenate([arrays[j].ravel() for j in members])
            got = ops.broadcast(tf.constant(flat), int(root_rank),
                                name="%s_state_%s" % (self.name, name),
                                ignore_name_scope=True,
                                process_set=self.params.process_set).numpy()
            at = 0
            for j in members:
                n = arrays[j].size
                out[j] = got[at:at + n].reshape(arrays[j].shape)
                at += n
        return out

    def load_full(self, optimizer, values):
        """Take this rank's slices of an unsharded optimizer's variable values
        (a list in that optimizer's order); ShardingError naming what differs."""
        plain = self.plain_structure(optimizer)
        slots, own = self._slot_by_key(optimizer)
        cls = type(optimizer)._hvd_base.__name__
        if len(values) != len(plain):
            slot_names = sorted(set(k[2] for k in plain if k[0] == "slot"))
            raise ShardingError(
                "incompatible optimizer checkpoint: it holds %d optimizer variables, "
                "but a %s built on these %d trainable variables has %d (%d of its own "
                "and the slots %s per variable): a checkpoint of another optimizer or "
                "of another model" % (
                    len(values), cls, len(self.model_vars), len(plain),
                    sum(1 for k in plain if k[0] == "own"), slot_names))
        by_slot = {}
        for j, (key, value) in enumerate(zip(plain, values)):
            value = np.asarray(value)
            expected = self.expected_shape(optimizer, key, own)
            if tuple(value.shape) != tuple(expected):
                raise ShardingError(
                    "incompatible optimizer checkpoint: variable %d (%s of %s) has shape "
                    "%s in the checkpoint but %s here" % (
                        j, self.describe(key), cls, tuple(value.shape), tuple(expected)))
            if key[0] == "own":
                own[key[1]].assign(value)
            else:
                by_slot.setdefault(key[2], {})[key[1]] = value
        for (k, name), slot in slots.items():
            per_var = by_slot.get(name, {})
            group = self.layout.groups[k]
            parts = [np.reshape(per_var[p.var], [-1])[p.lo:p.hi]
                     for p in group.pieces(self.rank)]
            flat = (np.concatenate(parts) if parts
                    else np.zeros([0], dtype=group.dtype))
            slot.assign(flat.astype(group.dtype))


def _pre_reduced(grads):
    """True if every gradient came from a DistributedGradientTape (already
    averaged), False if none did; ShardingError for a mixture."""
    marks = [bool(getattr(g, REDUCED_MARK, False)) for g in grads if g is not None]
    if marks and all(marks):
        return True
    if any(marks):
        raise ShardingError(
            "sharded optimizer: some gradients were averaged by a "
            "DistributedGradientTape and some were not; pass the gradients of a plain "
            "tf.GradientTape (the optimizer averages them with one reduce-scatter)")
    return False


class ShardedMethods(object):
    """The methods every sharded optimizer class has (Keras 3 here, tf-keras in
    sharded_tf_keras.py), whatever its Keras: they use only ``self._hvd_shard``
    and ``type(self)._hvd_base``::

        cls = type("Adam", (keras.optimizers.Adam,), dict(shared_methods(), ...))
    """

    def register_local_var(self, var):
        raise ShardingError(
            "a sharded optimizer has no local variables: every parameter's state is "
            "split over the ranks; use sharded=False with register_local_var / "
            "PartialDistributedOptimizer")

    def gather_state(self, root_rank=0):
        """Collect the whole optimizer state on ``root_rank`` for a checkpoint
        (``root_rank=None``: on every rank, as an elastic commit keeps it).

        Every rank of the optimizer must call it (it allgathers the slots, one
        at a time); afterwards ``model.save(...)`` / ``model.save_weights(...)``
        on ``root_rank`` writes an ordinary Keras checkpoint holding what an
        unsharded optimizer of the same class would hold, until the next step.
        Returns that state (a list of numpy arrays in the unsharded
        optimizer's variable order) on ``root_rank``, None elsewhere::

            state = opt.gather_state(root_rank=None)     # every rank
            opt.load_state(state)                         # back to it, any time
        """
        st = self._hvd_shard
        if st.layout is None:
            raise ShardingError("gather_state(): the optimizer is not built yet")
        values = st.gather_full(self, root_rank)
        st.pending = None if values is None else (int(self.iterations.numpy()), values)
        return values

    def load_state(self, values, root_rank=None):
        """Set the optimizer to a whole (unsharded) state: ``values`` as
        ``gather_state`` returns them, a list in the unsharded optimizer's
        variable order; each rank keeps its slices of the slots. With
        ``root_rank``, ``root_rank``'s ``values`` are broadcast first (every rank
        calls it; ``values`` is ignored elsewhere). Returns the state loaded.
        ShardingError (a ValueError) naming what differs if it does not fit::

            state = opt.gather_state(root_rank=None)
            opt.reshard()                                 # after the job re-formed
            opt.load_state(state, root_rank=0)            # rank 0's, every rank's slice
        """
        st = self._hvd_shard
        if st.layout is None:
            raise ShardingError("load_state(): the optimizer is not built yet")
        if root_rank is not None:
            values = st.broadcast_full(self, values, root_rank)
        st.load_full(self, values)
        return values

    def reshard(self):
        """Lay the state out again over the optimizer's ranks as they are now
        (after an elastic job re-formed at another size): the slot variables
        are made anew for this rank's new slice, with their initial values, and
        the ranks check again that they have the same variables (a collective).
        Then ``load_state`` fills them; tf_hvd.elastic's Keras states do both::

            state = opt.gather_state(root_rank=None)      # at N ranks
            ...                                           # the job re-forms at M
            opt.reshard()
            opt.load_state(state, root_rank=0)
        """
        st = self._hvd_shard
        if st.layout is None:
            raise ShardingError("reshard(): the optimizer is not built yet")
        variables = st.model_vars
        with tf.init_scope():
            st.unbuild()
        self.build(variables)

    def replicated_variables(self):
        """The optimizer variables every rank holds in full (iterations,
        learning rate, a loss scale), what a broadcast may send."""
        st = self._hvd_shard
        if st.slot_keys is None:
            return []
        return [v for key, v in zip(st.slot_keys, self.variables) if key[0] == "own"]

    def save_own_variables(self, store):
        st = self._hvd_shard
        if st.layout is None:
            return type(self)._hvd_base.save_own_variables(self, store)
        if st.size == 1:
            values = st.gather_full(self, 0)
        elif st.pending is not None and st.pending[0] == int(self.iterations.numpy()):
            values = st.pending[1]
        else:
            raise ShardingError(
                "a sharded optimizer holds 1/%d of the optimizer state on each rank: "
                "call optimizer.gather_state(root_rank) on every rank first (or use "
                "tf_hvd.keras.save_model), then "
                "save on that rank" % st.size)
        for i, value in enumerate(values):
            store[str(i)] = value

    def load_own_variables(self, store):
        st = self._hvd_shard
        if st.layout is None:
            return type(self)._hvd_base.load_own_variables(self, store)
        values = [store[str(i)] for i in range(len(store.keys()))]
        st.load_full(self, values)



def shared_methods():
    """ShardedMethods' methods, for a class namespace."""
    return dict((k, v) for k, v in vars(ShardedMethods).items() if not k.startswith("__"))


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
        pre_reduced = _pre_reduced(grads)
        dense = st.in_layout_order(grads, variables)

        def step(gradients):
            shard_grads = st.shard_grads(gradients, pre_reduced)
            st.refresh_shards()
            base.apply(self, shard_grads, st.shards)
            st.write_back()

        if st.agg_helper is None:
            return step(dense)
        aggregated = st.agg_helper.compute_gradients(dense, st.model_vars)
        st.agg_helper.apply_gradients(lambda: step(aggregated), grads=aggregated)

    def _clip_gradients(self, grads):
        return self._hvd_shard.clip(self, grads)

    def check_finite(self, grads):
        return self._hvd_shard.all_finite(base.check_finite(self, grads))

    methods = dict(__init__=__init__, build=build, apply=apply,
                   _clip_gradients=_clip_gradients)
    if is_lso:
        methods["check_finite"] = check_finite
        del methods["_clip_gradients"]
    return make_sharded_class(base, params, methods)


def make_sharded_class(base, params, methods):
    """The sharded subclass of ``base`` with ``methods`` (one Keras' step) and
    ShardedMethods'; same name, module and docstring as ``base``, so a saved
    model names the plain class."""
    namespace = dict(shared_methods())
    namespace.update(methods)
    namespace.update({
        "__module__": base.__module__,
        "__qualname__": getattr(base, "__qualname__", base.__name__),
        "__doc__": base.__doc__,
        "_hvd_distributed": True,
        "_hvd_sharded": True,
        "_hvd_params": params,
        "_hvd_base": base,
    })
    return type(base.__name__, (base,), namespace)


_CLIP_CLASSES = {}


def _clip_subclass(cls):
    """``cls`` whose clipping uses the norms over all shards (for the inner
    optimizer of a sharded LossScaleOptimizer)."""
    made = _CLIP_CLASSES.get(cls)
    if made is None:
        def _clip_gradients(self, grads):
            return self._hvd_shard.clip(self, grads)
        made = type(cls.__name__, (cls,), {
            "_clip_gradients": _clip_gradients, "_hvd_sharded_clip": True,
            "_hvd_base": getattr(cls, "_hvd_base", cls),
            "__module__": cls.__module__, "__doc__": cls.__doc__,
            "__qualname__": getattr(cls, "__qualname__", cls.__name__)})
        _CLIP_CLASSES[cls] = made
    return made


def is_sharded(optimizer):
    return bool(getattr(type(optimizer), "_hvd_sharded", False))


def create_sharded_optimizer(optimizer, params, cls):
    """A sharded copy of the Keras 3 ``optimizer`` (class ``cls`` made by
    sharded_class); an optimizer that was built hands its state over."""
    import keras
    check_supported(optimizer)
    config = optimizer.get_config()
    target = _updating_optimizer(optimizer)
    lr = getattr(target, "_learning_rate", None)
    if target is optimizer and ("learning_rate" in config and lr is not None
                                and not isinstance(lr, keras.Variable)):
        config["learning_rate"] = lr
    new = cls.from_config(config)
    if optimizer.built:
        values = [v.numpy() for v in optimizer.variables]
        new.build(list(optimizer._trainable_variables))
        new.built = True
        new._hvd_shard.load_full(new, values)
    return new

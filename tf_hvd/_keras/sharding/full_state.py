"""The unsharded view of a sharded optimizer's state: what an unsharded optimizer of
the same class, built on the model's variables, would hold (a list of arrays in its
variable order). Checkpoints and elastic commits keep the state in this form, so that it
restores at any number of ranks, sharded or not::

    values = gather(opt._hvd_shard, opt, root_rank=None)   # a collective: every rank
    load(opt._hvd_shard, opt, values)                       # this rank's slices of it
"""

import numpy as np
import tensorflow as tf

from tf_hvd import ops, topology
from tf_hvd._keras.sharding import variable_keys
from tf_hvd.exceptions import ShardingError


def plain_structure(state, optimizer):
    """The keys (variable_keys.py) of the variables an unsharded optimizer of this
    class, built on the model's variables, would have: learnt once by building one on
    one-element stand-ins."""
    if state.plain_keys is None:
        plain_cls = type(optimizer)._hvd_base
        with tf.init_scope():
            plain = plain_cls.from_config(optimizer.get_config())
            records = {}
            variable_keys.record_references(plain, records)
            stand_ins = [state.new_stand_in(i, tf.as_dtype(v.dtype).name)
                         for i, v in enumerate(state.model_vars)]
            plain.build(stand_ins)
            state.plain_keys = variable_keys.structure(plain, stand_ins, records)
    return state.plain_keys


def gather(state, optimizer, root_rank):
    """Every unsharded variable's value, on ``root_rank`` (None elsewhere; every rank
    when ``root_rank`` is None). Collective over the optimizer's ranks."""
    plain = plain_structure(state, optimizer)
    slots, own = _slots_by_key(state, optimizer)
    gathered = {}
    for (k, name), slot in sorted(slots.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        if state.size == 1:
            flat = slot.numpy()
        else:
            flat = ops.allgather(tf.convert_to_tensor(slot),
                                 name="%s_gather_state_%d_%s" % (state.name, k, name),
                                 ignore_name_scope=True,
                                 process_set=state.params.process_set)
            flat = flat.numpy() if _gets_it(state, root_rank) else None
        gathered[(k, name)] = flat
    if not _gets_it(state, root_rank):
        return None
    values = []
    for key in plain:
        if key[0] == "own":
            values.append(own[key[1]].numpy())
            continue
        _, i, name = key
        g, pos = state.layout.group_of[i]
        group = state.layout.groups[g]
        flat = gathered[(g, name)]
        off, size = group.offsets[pos], group.sizes[pos]
        values.append(flat[off:off + size].reshape(state.layout.variables[i][1]))
    return values


def broadcast(state, optimizer, values, root_rank):
    """``root_rank``'s ``values`` (an unsharded state, as gather gives it; ignored
    elsewhere) on every rank, one broadcast per dtype. Collective."""
    plain = plain_structure(state, optimizer)
    slots, own = _slots_by_key(state, optimizer)
    specs = []
    for key in plain:
        if key[0] == "own":
            v = own[key[1]]
            specs.append((tuple(v.shape), np.dtype(tf.as_dtype(v.dtype).as_numpy_dtype)))
        else:
            g, _ = state.layout.group_of[key[1]]
            dtype = tf.as_dtype(slots[(g, key[2])].dtype).as_numpy_dtype
            specs.append((state.layout.variables[key[1]][1], np.dtype(dtype)))
    mine = state.size == 1 or topology.rank() == int(root_rank)
    if mine and len(values) != len(specs):
        raise ShardingError(
            "broadcasting the optimizer state: rank %d has %d optimizer variables, "
            "but a %s built on these %d trainable variables has %d"
            % (topology.rank(), len(values), type(optimizer)._hvd_base.__name__,
               len(state.model_vars), len(specs)))
    arrays = [np.asarray(values[j], dtype) if mine else np.zeros(shape, dtype)
              for j, (shape, dtype) in enumerate(specs)]
    if state.size == 1:
        return arrays
    by_dtype = {}
    for j, a in enumerate(arrays):
        by_dtype.setdefault(a.dtype.name, []).append(j)
    out = list(arrays)
    for name, members in sorted(by_dtype.items()):
        flat = np.concatenate([arrays[j].ravel() for j in members])
        got = ops.broadcast(tf.constant(flat), int(root_rank),
                            name="%s_state_%s" % (state.name, name),
                            ignore_name_scope=True,
                            process_set=state.params.process_set).numpy()
        at = 0
        for j in members:
            n = arrays[j].size
            out[j] = got[at:at + n].reshape(arrays[j].shape)
            at += n
    return out


def load(state, optimizer, values):
    """Take this rank's slices of an unsharded optimizer's variable values (a list in
    that optimizer's order); ShardingError naming what differs."""
    plain = plain_structure(state, optimizer)
    slots, own = _slots_by_key(state, optimizer)
    cls = type(optimizer)._hvd_base.__name__
    if len(values) != len(plain):
        slot_names = sorted(set(k[2] for k in plain if k[0] == "slot"))
        raise ShardingError(
            "incompatible optimizer checkpoint: it holds %d optimizer variables, "
            "but a %s built on these %d trainable variables has %d (%d of its own "
            "and the slots %s per variable): a checkpoint of another optimizer or "
            "of another model" % (
                len(values), cls, len(state.model_vars), len(plain),
                sum(1 for k in plain if k[0] == "own"), slot_names))
    by_slot = {}
    for j, (key, value) in enumerate(zip(plain, values)):
        value = np.asarray(value)
        expected = _expected_shape(state, key, own)
        if tuple(value.shape) != tuple(expected):
            raise ShardingError(
                "incompatible optimizer checkpoint: variable %d (%s of %s) has shape "
                "%s in the checkpoint but %s here" % (
                    j, _describe(state, key), cls, tuple(value.shape), tuple(expected)))
        if key[0] == "own":
            own[key[1]].assign(value)
        else:
            by_slot.setdefault(key[2], {})[key[1]] = value
    for (k, name), slot in slots.items():
        per_var = by_slot.get(name, {})
        group = state.layout.groups[k]
        parts = [np.reshape(per_var[p.var], [-1])[p.lo:p.hi]
                 for p in group.pieces(state.rank)]
        flat = (np.concatenate(parts) if parts
                else np.zeros([0], dtype=group.dtype))
        slot.assign(flat.astype(group.dtype))


def _slots_by_key(state, optimizer):
    """{(group, name): shard slot variable} and the list of own variables."""
    slots, own = {}, []
    for key, v in zip(state.slot_keys, optimizer.variables):
        if key[0] == "slot":
            slots[(key[1], key[2])] = v
        else:
            own.append(v)
    return slots, own


def _describe(state, key):
    if key[0] == "own":
        return "optimizer variable %d of its own (iterations, learning_rate, ...)" % key[1]
    return "slot '%s' of trainable variable '%s'" % (
        key[2], state.layout.variables[key[1]][0])


def _expected_shape(state, key, own):
    if key[0] == "own":
        return tuple(own[key[1]].shape)
    return state.layout.variables[key[1]][1]


def _gets_it(state, root_rank):
    """Whether this rank gets the state (root_rank None: every rank does)."""
    return root_rank is None or state.size == 1 or topology.rank() == int(root_rank)

"""Names for an optimizer's variables that do not depend on how they are laid out.

A sharded optimizer's slots are made from the flat shard variables, an unsharded one's
from the model's variables; both are described by the same keys, so that one's state
can be loaded into the other (full_state.py): ``("slot", i, name)`` is the slot ``name``
(Adam's "momentum", ...) made from reference variable ``i``, ``("own", k)`` the k-th
variable of the optimizer's own (iterations, learning_rate, a LossScaleOptimizer's
scale, Nadam's u_product)::

    records = {}
    record_references(optimizer, records)     # before the optimizer is built
    optimizer.build(references)
    keys = structure(optimizer, references, records)
"""


def record_references(optimizer, records):
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


def structure(optimizer, references, records):
    """The keys of ``optimizer.variables``, in order (see the module docstring)."""
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

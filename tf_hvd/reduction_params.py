"""How a training wrapper reduces gradients: Horovod's DistributedOptimizer and
DistributedGradientTape parameters, gathered once into one value.

The public wrappers keep Horovod's signatures; each turns its arguments into a
``ReductionParams`` right away and passes that one value on (to the TF1
optimizer, the Keras wrappers, the tape), so the parameter list is written in
one place and checked once::

    params = ReductionParams.from_call(dict(op=hvd.Sum, num_groups=2))
    params.groups                      # 2
    reduce = params.allreduce_grads_fn("DistributedAdam")
    grads = reduce(grads, variables)
"""

import dataclasses

from tf_hvd.allreduce_grads import groups_from_num_groups, make_allreduce_grads_fn
from tf_hvd.compression import Compression
from tf_hvd.process_sets import registered_set_id
from tf_hvd.reduce_ops import Average


@dataclasses.dataclass(frozen=True)
class ReductionParams:
    """Horovod's reduction parameters (less the optimizer or tape), validated.

    Raises ValueError for an unregistered process set, a
    ``gradient_predivide_factor`` with an op other than Average, or
    ``backward_passes_per_step`` below 1.
    """

    name: object = None
    use_locking: bool = False
    device_dense: str = ""
    device_sparse: str = ""
    compression: object = Compression.none
    sparse_as_dense: bool = False
    backward_passes_per_step: int = 1
    op: int = Average
    gradient_predivide_factor: float = 1.0
    average_aggregated_gradients: bool = False
    groups: object = None
    process_set: object = None
    scale_local_gradients: bool = True

    def __post_init__(self):
        registered_set_id(self.process_set)
        if self.gradient_predivide_factor != 1.0 and self.op != Average:
            raise ValueError("gradient_predivide_factor not supported with op != "
                             "Average")
        if int(self.backward_passes_per_step) < 1:
            raise ValueError("backward_passes_per_step must be >= 1, got %r"
                             % (self.backward_passes_per_step,))
        object.__setattr__(self, "backward_passes_per_step",
                           int(self.backward_passes_per_step))
        object.__setattr__(self, "scale_local_gradients", bool(self.scale_local_gradients))

    @classmethod
    def from_call(cls, arguments):
        """The parameters of a public wrapper's call, from its ``locals()`` taken
        first thing: the entries named like a field are taken, the others (the
        optimizer, the tape, local_layers) left. Horovod's deprecated
        ``num_groups`` is folded into ``groups`` (giving both is a ValueError)."""
        fields = dict((f.name, arguments[f.name]) for f in dataclasses.fields(cls)
                      if f.name in arguments)
        fields["groups"] = groups_from_num_groups(arguments.get("num_groups", 0),
                                                  fields.get("groups"))
        return cls(**fields)

    def replace(self, **changes):
        """A copy with some parameters changed (checked again)."""
        return dataclasses.replace(self, **changes)

    def allreduce_grads_fn(self, name):
        """``allreduce_grads(grads, variables=None)`` for these parameters; ``name``
        names the collectives (tf_hvd.allreduce_grads)."""
        return make_allreduce_grads_fn(
            name, self.device_dense, self.device_sparse, self.compression,
            self.sparse_as_dense, self.op, self.gradient_predivide_factor, self.groups,
            self.process_set)

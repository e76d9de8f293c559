"""The sharded DistributedOptimizer (``DistributedOptimizer(opt, sharded=True)``).

Each rank keeps the optimizer's slots (Adam's momentum and velocity, SGD's
momentum, ...) for its slice of the parameters only (ZeRO stage 1). A step:

1. the gradients of one dtype are laid end to end and ``hvd.reducescatter``
   averages them, each rank receiving the averaged gradient of its slice
   (layout.py says which slice);
2. the rank's *shard variable* (a flat copy of its slice of the parameters,
   refreshed from the model's variables at every step) is updated by the
   wrapped optimizer class's own update: Keras' update rule, weight decay,
   loss scaling and ``iterations`` as usual, on 1/N of the elements;
3. every rank gets the updated parameters (``hvd.allgather`` of the slices),
   which are written back into the model's variables.

The two collectives move the bytes of one allreduce: the core's reduce-scatter
and allgather move only the slices (a ring over the network, shared memory on
one host). The extra work is local copies (the gradients concatenated, the slice
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

The room, from the bottom (no module imports one above it)::

    layout.py         which elements of which variable each rank's slice holds (pure Python)
    support.py        the optimizers and options that can be sharded
    variable_keys.py  names for an optimizer's variables that survive re-laying them out
    state.py          ShardedState: a rank's layout, shard variables and a step's collectives
    clipping.py       clipping and the loss scale's finiteness check over all slices
    full_state.py     the unsharded view: gather, broadcast and load a whole state
    methods.py        what every sharded class has (gather_state, load_state, reshard, ...)
    keras3.py         the Keras 3 class and the copy of a user's optimizer
    tf_keras.py       the same for tf-keras 2 (TF_USE_LEGACY_KERAS=1)

tf_hvd._keras.optimizer picks keras3 or tf_keras::

    cls = keras3.sharded_class(type(opt), params, "DistributedAdam")
    opt = keras3.create_sharded_optimizer(opt, params, cls)
"""

"""The goals compare.py judges tf_hvd by, as data: one row per target, in the order of the
summary. compare.py looks the measured values up in the part records; what a target is
called, what it compares, its goal and where the goal came from are here, so that a goal
changes here and nowhere else.

A row's ``name`` and ``description`` are format strings; compare.py fills in
``transport`` (gloo, mpi) and, where a row has them, ``size``, ``mode`` and ``model``
(and the chain lengths of the latency row). ``comparison`` is ``<=`` (lower is better)
or ``>=``; a ``stretch`` target is reported but not needed for ``all_targets_met``.
"""

import collections

Goal = collections.namedtuple(
    "Goal", "key name description unit better goal comparison stretch origin")

_ROWS = [
    Goal("latency_vs_mwms", "latency_4KiB_vs_mwms[{transport}]",
         "4 KiB allreduce latency inside tf.function (chains of {chain} and {mwms_chain} ops), "
         "tf_hvd/MWMS", "us", "lower", 1.0 / 20, "<=", False, "the first goals"),
    Goal("latency_vs_mpi4py", "latency_4KiB_vs_mpi4py[{transport}]",
         "4 KiB allreduce latency inside tf.function, tf_hvd/raw mpi4py (stretch goal)",
         "us", "lower", 10.0, "<=", True, "the first goals"),
    Goal("unnamed_eager", "unnamed_eager_4KiB_vs_named[{transport}]",
         "4 KiB eager allreduce latency, without name= / with a fixed name", "us", "lower",
         1.3, "<=", False, "the first goals"),
    Goal("chain_vs_mpi4py", "allreduce_chain_{size}_vs_mpi4py[{transport}]",
         "{human_size} allreduce bus bandwidth inside tf.function (chain), tf_hvd/the "
         "strongest plain mpi4py way (kept buffers)", "GB/s", "higher", 1.0, ">=", False,
         "an allreduce at plain MPI's speed at every size, 64 KiB..256 MiB"),
    Goal("memcpy", "busbw_256MiB_vs_memcpy[{transport}]",
         "256 MiB allreduce bus bandwidth inside tf.function (chain), tf_hvd/memcpy of "
         "256 MiB (numpy copyto into a kept buffer)", "GB/s", "higher", 0.5, ">=", False,
         "large allreduces at half the memory-copy speed"),
    Goal("bound", "{mode}_{model}_vs_bound[{transport}]",
         "{what} throughput, {model_upper}, tf_hvd/the compute bound (the same processes "
         "without any allreduce)", "samples/s", "higher", 0.9, ">=", False,
         "training within 10% of the no-communication bound"),
    Goal("fusion_vs_mwms", "fusion_steps_vs_mwms[{transport}]",
         "fusion step rate (200 x 16 KiB + 4 x 4 MiB), tf_hvd/MWMS", "steps/s", "higher",
         3.0, ">=", False, "the first goals"),
    Goal("fit_mlp_vs_mwms", "fit_mlp_vs_mwms[{transport}]",
         "Keras model.fit throughput, MLP, tf_hvd/MWMS (patched)", "samples/s", "higher",
         2.0, ">=", False, "the first goals"),
    Goal("fit_cnn_vs_mwms", "fit_cnn_vs_mwms[{transport}]",
         "Keras model.fit throughput, CNN, tf_hvd/MWMS (patched)", "samples/s", "higher",
         1.6, ">=", False, "the first goals"),
    Goal("fusion_vs_mpi4py", "fusion_steps_vs_mpi4py[{transport}]",
         "fusion step rate (200 x 16 KiB + 4 x 4 MiB), tf_hvd/mpi4py's fastest way",
         "steps/s", "higher", 0.8, ">=", False, "the first goals"),
    Goal("tape_vs_single", "tape_mlp_vs_single_process[{transport}]",
         "DistributedGradientTape tf.function loop throughput, MLP, tf_hvd/one process "
         "with the global batch", "samples/s", "higher", 0.95, ">=", False,
         "the first goals"),
]
GOALS = collections.OrderedDict((g.key, g) for g in _ROWS)

# Goals of the other drivers, judged the same way (every round must clear them).
CONTENTION_GOAL = 0.8   # contention.py: (busy fit / bound) / (quiet fit / bound): one busy process costs at most 20%
WHEEL_GOAL = 0.97       # wheel_vs_source.py: source build time / wheel time
# single_op_bench.py: what one allreduce per call adds over TensorFlow's floor / mpi4py's
# in-place time: at most MPI's own time from 64 KiB, at most 5x below (where MPI's few
# microseconds are near the hardware's).
SINGLE_OP_GOAL, SINGLE_OP_SMALL_GOAL, SINGLE_OP_SMALL_BELOW = 1.0, 5.0, 64 * 1024


def single_op_goal(nbytes):
    """The goal of added / mpi4py at one size.

    >>> single_op_goal(4096), single_op_goal(65536)
    (5.0, 1.0)
    """
    return SINGLE_OP_SMALL_GOAL if nbytes < SINGLE_OP_SMALL_BELOW else SINGLE_OP_GOAL


def check(key, hvd, alternative, hvd_value, alt_value, detail=None, **names):
    """One target record: the row ``key`` with its names filled in, the two values and
    their ratio, and whether this round's ratio clears the goal (None: a value is missing).
    """
    g = GOALS[key]
    ratio = hvd_value / alt_value if (hvd_value and alt_value) else None
    met = None
    if ratio is not None:
        met = ratio <= g.goal if g.comparison == "<=" else ratio >= g.goal
    return {"name": g.name.format(**names), "description": g.description.format(**names),
            "tf_hvd": hvd, "alternative": alternative, "tf_hvd_value": hvd_value,
            "alternative_value": alt_value, "unit": g.unit, "better": g.better,
            "ratio": ratio, "comparison": g.comparison, "target": g.goal, "met": met,
            "stretch": g.stretch, "detail": detail}

"""The smallest patch that lets Keras 3 ``model.fit`` run under
``tf.distribute.MultiWorkerMirroredStrategy`` (MWMS) on TensorFlow 2.21.

What goes wrong without it (Keras 3.15, TF 2.21, two or more workers):

1. Before the first step, Keras' TensorFlow trainer (``_maybe_symbolic_build``)
   calls ``strategy.reduce("MEAN", batch, axis=None)`` on the whole first batch,
   a *tuple* ``(x, y)`` of PerReplica values. ``Strategy.reduce`` takes one
   value, not a nest ("TODO(josh11b): support `value` being a nest" in
   distribute_lib.py); in multi-worker mode it ends in
   ``convert_to_tensor(tuple of PerReplica)``:
   ``ValueError: Attempt to convert a value (PerReplica:{...}) with an
   unsupported type``.
2. Once that passes, every step reduces the logs (loss and metric results,
   scalars) with ``strategy.reduce("MEAN", v, axis=0)``, which sums over axis 0
   of a 0-d tensor: ``ValueError: Invalid reduction dimension 0 for input with
   0 dimensions``.

The patch (on the one strategy object, nothing global) wraps its ``reduce``:
apply it to each element of a nest, and reduce 0-d values across replicas only
(``axis=None``), which is what the mean over replicas of a scalar means.
Training itself (gradients, variables) is untouched.

    import mwms_keras3_patch
    strategy = tf.distribute.MultiWorkerMirroredStrategy(...)
    mwms_keras3_patch.apply(strategy)

``python mwms_keras3_patch.py --demo`` shows it: two workers fit a small model
without the patch (failure 1), with only its first half (failure 2), then with
the whole patch (they train).
"""

import argparse
import json
import os
import subprocess
import sys
import time

DESCRIPTION = ("MultiWorkerMirroredStrategy.reduce wrapped on the strategy instance: "
               "applied per element of a nested value, and 0-d values reduced across "
               "replicas only (axis=None); needed because Keras 3.15's model.fit on TF 2.21 "
               "calls strategy.reduce on the (x, y) batch tuple and with axis=0 on scalar "
               "logs, both of which raise in multi-worker mode")


def apply(strategy, _scalars=True):
    """Patches strategy.reduce in place (idempotent); returns DESCRIPTION.

    (_scalars=False leaves out the second half; only the demo uses it, to show
    that the first half alone is not enough.)
    """
    import tensorflow as tf
    if getattr(strategy, "_keras3_reduce_patched", False):
        return DESCRIPTION
    original = strategy.reduce

    def reduce_one(reduce_op, value, axis):
        if axis is not None and _scalars:
            local = value
            if isinstance(value, tf.distribute.DistributedValues):
                local = strategy.experimental_local_results(value)[0]
            if getattr(getattr(local, "shape", None), "rank", None) == 0:
                axis = None
        return original(reduce_op, value, axis)

    def reduce(reduce_op, value, axis=None):
        return tf.nest.map_structure(lambda v: reduce_one(reduce_op, v, axis), value)

    strategy.reduce = reduce
    strategy._keras3_reduce_patched = True
    return DESCRIPTION


# ---------------------------------------------------------------------------
# Demonstration: the same two-worker fit without and with the patch


def _demo_worker(variant):
    import numpy as np
    import tensorflow as tf
    import keras
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    if variant != "unpatched":
        apply(strategy, _scalars=(variant == "patched"))
    with strategy.scope():
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                                  keras.layers.Dense(2)])
        model.compile(optimizer="sgd", metrics=["accuracy"],
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(0)
    ds = tf.data.Dataset.from_tensor_slices(
        (rng.random((256, 8), dtype=np.float32), rng.integers(0, 2, 256))).batch(32).repeat()
    try:
        history = model.fit(ds, steps_per_epoch=4, epochs=1, verbose=0)
        print("DEMO-RESULT ok loss=%.4f" % history.history["loss"][-1], flush=True)
        code = 0
    except Exception as e:  # the unpatched failure is the point of the demo
        print("DEMO-RESULT error %s: %s" % (type(e).__name__, str(e).splitlines()[0][:200]),
              flush=True)
        code = 3
    os._exit(code)


def _demo(timeout):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from lib.launch import free_ports
    for variant in ("unpatched", "nest-only", "patched"):
        ports = free_ports(2)
        procs = []
        for index in range(2):
            env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_CONFIG=json.dumps(
                {"cluster": {"worker": ["127.0.0.1:%d" % p for p in ports]},
                 "task": {"type": "worker", "index": index}}))
            procs.append(subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--demo-worker", variant],
                env=env, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, text=True, start_new_session=True))
        deadline = time.time() + timeout
        lines = []
        for p in procs:
            try:
                out, _ = p.communicate(timeout=max(1.0, deadline - time.time()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
                out, _ = p.communicate()
                out = (out or "") + "DEMO-RESULT timeout\n"
            lines += [l for l in out.splitlines() if l.startswith("DEMO-RESULT")]
        print("%-11s %s" % (variant + ":", " | ".join(sorted(set(lines))) or "no result"),
              flush=True)
    print("patch: " + DESCRIPTION)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Keras 3 fit under MWMS: the patch")
    parser.add_argument("--demo", action="store_true",
                        help="run a two-worker fit without, then with the patch")
    parser.add_argument("--demo-worker", choices=("unpatched", "nest-only", "patched"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--timeout", type=float, default=240.0)
    a = parser.parse_args()
    if a.demo_worker:
        _demo_worker(a.demo_worker)
    elif a.demo:
        _demo(a.timeout)
    else:
        print(DESCRIPTION)

"""Autotune under the launcher (HOROVOD_AUTOTUNE=1, small samples; see
tests/parallel/test_autotune.py): results stay exact while the tuner switches
the fusion threshold and the response cache, every rank records the same
switches at the same negotiation round, and the tuner finishes.

Each rank writes history<r>.json (tf_hvd._hvd.autotune_history()) into the
result directory; the test compares them with each other and with rank 0's
HOROVOD_AUTOTUNE_LOG.
"""

import json
import os
import sys
import time

import numpy as np
import tensorflow as tf

import tf_hvd as hvd
from tf_hvd._library import lib as _hvd  # the loaded library (ops registered first)

import checklib

SMALL, LARGE = 16, 2  # tensors per step: 16 x 16 KiB and 2 x 1 MiB (float32)


@tf.function
def _step(tensors):
    # In one graph the allreduces reach the core together and can be fused.
    return [hvd.allreduce(t, op=hvd.Sum, name="at_%d" % i) for i, t in enumerate(tensors)]


def _inputs(r, step):
    shapes = [[4096]] * SMALL + [[262144]] * LARGE
    return [tf.fill(s, float(r + 1 + step + i)) for i, s in enumerate(shapes)]


def check_autotune(ck, n, r, result_dir, max_samples):
    ranks_sum = n * (n + 1) // 2
    step = 0
    deadline = time.time() + 150
    while True:
        outs = _step(_inputs(r, step))
        for i, out in enumerate(outs):
            want = float(ranks_sum + n * (step + i))
            got = out.numpy()
            if not (got == want).all():
                ck.fail("step %d tensor %d" % (step, i), "got %r, expected %r" % (
                    got[:4], want))
                break
        else:
            ck.passed()
        step += 1
        # Rank 0 knows when the tuner is done; every rank learns it in the same step.
        done = float(r == 0 and len(_hvd.autotune_history()) >= max_samples)
        if time.time() > deadline:
            done = 1.0
        if hvd.allreduce(tf.constant([done]), op=hvd.Max, name="autotune_done").numpy()[0]:
            break
    history = _hvd.autotune_history()
    ck.equal("switches recorded", len(history), max_samples)
    ck.log("%d steps, %d switches" % (step, len(history)))
    with open(os.path.join(result_dir, "history%d.json" % r), "w") as f:
        json.dump(history, f)


def main():
    args = checklib.parse_args()
    hvd.init()
    n, r = hvd.size(), hvd.rank()
    ck = checklib.Checker(r, n, args.result_dir, args.only)
    max_samples = int(os.environ["HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES"])
    ck.section("autotune", check_autotune, ck, n, r, args.result_dir, max_samples)
    code = ck.finish()
    hvd.shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())

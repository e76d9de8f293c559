"""Functions and classes the Ray tests send to RayExecutor's actors.

They live in their own module (on the Ray workers' PYTHONPATH) so that Ray pickles them
by reference, as it would a user's library code.
"""

import os


def collective_values(x):
    """Exact results of a few collectives, plus this rank's view of its job."""
    import numpy as np
    import tensorflow as tf

    import tf_hvd as hvd
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    summed = hvd.allreduce(tf.constant([float(rank + 1), x, 2.0 ** -20 * rank]), op=hvd.Sum)
    averaged = hvd.allreduce(tf.constant([float(rank), 10.0 * rank], tf.float64),
                             op=hvd.Average)
    gathered = hvd.allgather(tf.fill([rank + 1], rank))
    broadcast = hvd.broadcast(tf.constant([rank + 7]), root_rank=size - 1)
    with open("/proc/self/cmdline", "rb") as f:
        cmdline = f.read().decode(errors="replace")
    secret = os.environ.get("HOROVOD_GLOO_RENDEZVOUS_SECRET", "")
    return {"rank": rank, "size": size, "local_rank": hvd.local_rank(),
            "local_size": hvd.local_size(), "cross_rank": hvd.cross_rank(),
            "cross_size": hvd.cross_size(),
            "sum": np.asarray(summed).tolist(), "average": np.asarray(averaged).tolist(),
            "allgather": np.asarray(gathered).tolist(),
            "broadcast": np.asarray(broadcast).tolist(),
            "secret_len": len(secret), "secret_in_cmdline": bool(secret) and secret in cmdline,
            "extra": os.environ.get("RAY_TEST_EXTRA")}


def my_rank_plus(offset, scale=1):
    return (int(os.environ["HOROVOD_RANK"]) + offset) * scale


def fail_on_rank_one(message):
    if os.environ["HOROVOD_RANK"] == "1":
        raise ValueError(message)
    return "rank 0 fine"


def die_on_rank_one():
    if os.environ["HOROVOD_RANK"] == "1":
        os._exit(3)
    return "rank 0 fine"


class Counter(object):
    """An ``executable_cls``: made once per actor, after the rank's variables are set."""

    def __init__(self, start, step=1):
        self.value = start + int(os.environ["HOROVOD_RANK"])
        self.step = step

    def bump(self):
        self.value += self.step
        return self.value


def bump(counter):
    return counter.bump()


def executable_is(executable):
    return executable is None


def train_loop_reporting_collectives(config):
    """A Ray Train training function: joins the tf_hvd job and writes exact collectives
    together with Ray Train's own view of the worker to ``config["out"]``-<rank>.json
    (Ray Train V2 keeps reported metrics only with checkpoints)."""
    import json

    import numpy as np
    import ray.train
    import tensorflow as tf

    import tf_hvd as hvd
    hvd.init()
    context = ray.train.get_context()
    summed = hvd.allreduce(tf.constant([float(hvd.rank() + 1), config["x"]]), op=hvd.Sum)
    ranks = hvd.allgather_object((hvd.rank(), context.get_world_rank(),
                                  context.get_local_rank(), hvd.local_rank()))
    with open("%s-%d.json" % (config["out"], hvd.rank()), "w") as f:
        json.dump({"sum": np.asarray(summed).tolist(), "size": hvd.size(),
                   "world_size": context.get_world_size(), "ranks": ranks}, f)

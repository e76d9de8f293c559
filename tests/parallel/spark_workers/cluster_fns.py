"""Functions the standalone-cluster test's driver sends to the ranks (by reference: this
folder is on the executors' PYTHONPATH, as a user's library would be)."""

import json
import os
import time


def executor_jvm_pid():
    """The pid of the executor JVM this rank's process runs under."""
    import psutil
    p = psutil.Process()
    while p is not None:
        if p.name() == "java":
            return p.pid
        p = p.parent()
    return None


def allreduce_until_killed(marker, victim_host):
    """Joins the job, then allreduces until the job fails; the rank on ``victim_host``
    writes {rank, executor JVM pid} to ``marker`` once every rank has met."""
    import tensorflow as tf

    import tf_hvd as hvd
    hvd.init()
    hvd.allreduce(tf.constant(1.0), name="met")
    if os.uname().nodename == victim_host:
        with open(marker + ".tmp", "w") as f:
            json.dump({"rank": hvd.rank(), "jvm": executor_jvm_pid()}, f)
        os.rename(marker + ".tmp", marker)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        hvd.allreduce(tf.constant(1.0), name="beat")
        time.sleep(0.05)
    return "never killed"

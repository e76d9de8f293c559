"""How many ranks a Spark cluster can run at once: its task slots.

A barrier stage starts all its tasks together or not at all; asked for more tasks than
the cluster has slots, Spark retries the stage's slot check for minutes
(``spark.scheduler.barrier.maxConcurrentTasksCheck.*``: 40 times 15 s) before failing.
tf_hvd.spark.run checks first, with the number Spark's own check uses (the executors'
cores divided by ``spark.task.cpus``, and by their GPUs where tasks ask for GPUs), and
fails at once with the numbers.

Executors register with the driver after the SparkContext starts: a check waits for them
as Spark's scheduler does (``spark.scheduler.maxRegisteredResourcesWaitingTime``, 30 s
from the context's start), and at least a short grace from the call.
"""

import time

GRACE_S = 3.0


def task_slots(sc):
    """The number of tasks the cluster's registered executors can run at once."""
    jsc = sc._jsc.sc()
    return int(jsc.maxNumConcurrentTasks(jsc.resourceProfileManager().defaultResourceProfile()))


def _registration_wait_s(sc):
    text = sc.getConf().get("spark.scheduler.maxRegisteredResourcesWaitingTime", "30s")
    jvm_seconds = sc._jvm.org.apache.spark.network.util.JavaUtils.timeStringAsSec
    return float(jvm_seconds(text))


def resolve_num_proc(sc, num_proc, start_timeout_s, clock=time.time, sleep=time.sleep):
    """``num_proc``, or the cluster's task slots when None; raises ValueError when the
    cluster has fewer slots than ``num_proc`` once its executors had time to register."""
    if num_proc is not None:
        if isinstance(num_proc, bool) or int(num_proc) != num_proc or num_proc < 1:
            raise ValueError("tf_hvd.spark.run: num_proc must be a positive integer, got %r"
                             % (num_proc,))
        num_proc = int(num_proc)
    deadline = max(sc.startTime / 1000.0 + _registration_wait_s(sc), clock() + GRACE_S)
    deadline = min(deadline, clock() + start_timeout_s)
    while True:
        slots = task_slots(sc)
        if num_proc is None and slots > 0 and clock() >= deadline - GRACE_S:
            return slots
        if num_proc is not None and slots >= num_proc:
            return num_proc
        if clock() >= deadline:
            break
        sleep(0.2)
    if num_proc is None:
        raise ValueError("tf_hvd.spark.run: the Spark cluster (master %s) has no executor "
                         "with a free task slot; start executors, or give num_proc"
                         % sc.master)
    raise ValueError(
        "tf_hvd.spark.run: num_proc=%d but the Spark cluster (master %s) has %d task "
        "slot(s) (executor cores / spark.task.cpus=%s); a barrier stage runs every rank at "
        "once, so it would wait for slots that never come: use num_proc <= %d or add "
        "executors" % (num_proc, sc.master, slots, sc.getConf().get("spark.task.cpus", "1"),
                       slots))

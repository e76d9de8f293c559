"""Where a Spark job's tasks and its driver meet in the driver's rendezvous store.

Every key is under the job's own id, next to the ranks' Gloo keys; the store is the
authenticated one of tf_hvd.job.rendezvous, so only the job's tasks can write there.

    >>> task_key("ab12", 1), error_key("ab12", 0), output_key("ab12", 1, 3)
    ('tf_hvd-spark/ab12/task/1', 'tf_hvd-spark/ab12/error/0', 'tf_hvd-spark/ab12/out/1/3')
"""


def task_key(job, partition):
    """JSON {rank, address, hostname, executor}: a task that started, and its rank."""
    return "tf_hvd-spark/%s/task/%d" % (job, partition)


def error_key(job, rank):
    """The pickled error record of a rank whose function raised or whose process died."""
    return "tf_hvd-spark/%s/error/%d" % (job, rank)


def output_key(job, rank, seq):
    """JSON [[stream, line], ...]: the rank's ``seq``-th batch of output lines."""
    return "tf_hvd-spark/%s/out/%d/%d" % (job, rank, seq)

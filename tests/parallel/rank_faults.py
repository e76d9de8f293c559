"""The three ways rank 1 fails, as one function every function launcher runs (tf_hvd.run,
tf_hvd.spark.run, RayExecutor); the tests check that each names rank 1 first, with its
host and pid, as tfhvdrun does (test_faults.py, test_liveness.py):

raise   rank 1 raises KeyError('shard 7 is missing') after hvd.init(); the others wait
        in an allreduce
kill    rank 1 SIGKILLs itself at step 3 of an allreduce loop
freeze  rank 1 SIGSTOPs itself at step 3 (run with a short HOROVOD_PEER_TIMEOUT_SECONDS)

Every rank first prints 'pid <its pid>'.

    tf_hvd.run(rank_faults.fail_rank_one, args=("kill",), num_proc=2)
"""

FIRST_LINES = {  # after "rank 1 (on HOST, pid PID) "
    "raise": r"raised KeyError: 'shard 7 is missing'",
    "kill": r"was killed by signal 9 \(SIGKILL\)",
    "freeze": r"stopped answering \(its core sent no liveness proof for \d+ s\) and was "
              r"killed \(SIGKILL\)",
}


def fail_rank_one(how):
    import os
    import signal

    import tensorflow as tf

    import tf_hvd as hvd

    hvd.init()
    print("pid %d" % os.getpid(), flush=True)
    if how == "raise":
        if hvd.rank() == 1:
            raise KeyError("shard 7 is missing")
        hvd.allreduce(tf.constant([1.0]), name="never")
    for step in range(100000):
        if hvd.rank() == 1 and step == 3:
            os.kill(os.getpid(), signal.SIGKILL if how == "kill" else signal.SIGSTOP)
        hvd.allreduce(tf.constant([1.0]), name="step%d" % step)

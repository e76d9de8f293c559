"""A custom training loop under tf_hvd.elastic (driven by tests/parallel/test_elastic.py).

    tfhvdrun -np 3 --min-np 2 python elastic_worker.py --dir DIR --victim 1 --kill-at 8

With --grow-marker, rank 0 creates that file at step 3; the test's host discovery script
then prints one more slot and the launcher starts a rank that joins at the next commit.
Each step processes one global batch of 12 samples split evenly between the ranks of the
moment, and commits (step, samples, variables). Rank --victim SIGKILLs itself at step
--kill-at; the others roll back to the last commit and go on as a smaller job. Every rank
appends JSON events to DIR/rank<r>.events (r: its first rank).
"""

import argparse
import os
import signal
import socket
import time

from events import append_event

parser = argparse.ArgumentParser()
parser.add_argument("--dir", required=True)
parser.add_argument("--victim", type=int, default=1)
parser.add_argument("--kill-at", type=int, default=8)
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--sleep", type=float, default=0.05)
parser.add_argument("--grow-marker", default=None,
                    help="rank 0 creates this file at step 3 (the discovery script then "
                         "prints one more slot)")
ARGS = parser.parse_args()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tf_hvd as hvd  # noqa: E402
import tf_hvd.elastic  # noqa: E402

GLOBAL_BATCH = 12
hvd.init()
FIRST_RANK = int(os.environ.get("TF_HVD_ELASTIC_ID", hvd.rank()))


def emit(event, **fields):
    fields.update(event=event, first_rank=FIRST_RANK)
    append_event(ARGS.dir, FIRST_RANK, fields)


w = tf.Variable(np.zeros([4], np.float32))
state = tf_hvd.elastic.TensorFlowState([w], step=0, samples=0)
state.register_reset_callbacks([lambda: emit("reset", size=hvd.size(), rank=hvd.rank(),
                                             step=state.step)])


@tf_hvd.elastic.run
def train(state):
    emit("train_begins", step=state.step, samples=state.samples, size=hvd.size(),
         rank=hvd.rank(), w=[float(v) for v in w.numpy()], host=socket.gethostname())
    while state.step < ARGS.steps:
        if ARGS.grow_marker and state.step == 3 and hvd.size() < 3:
            # wait for the rank the discovery script adds, committing (which checks for
            # new hosts) without advancing
            if FIRST_RANK == 0:
                open(ARGS.grow_marker, "a").close()
            time.sleep(0.2)
            state.commit()
            continue
        if FIRST_RANK == ARGS.victim and state.step == ARGS.kill_at:
            emit("killing_myself", step=state.step)
            os.kill(os.getpid(), signal.SIGKILL)
        n = GLOBAL_BATCH // hvd.size()
        start = state.step * GLOBAL_BATCH + hvd.rank() * n
        x = np.arange(start, start + n, dtype=np.float32)[:, None] * np.ones([1, 4], np.float32)
        grad = hvd.allreduce(tf.reduce_mean(x, 0) * 1e-3, name="grad")
        w.assign_sub(grad)
        total = hvd.allreduce(tf.constant(n), op=hvd.Sum, name="samples")
        state.samples += int(total.numpy())
        state.step += 1
        state.commit()
        time.sleep(ARGS.sleep)


train(state)
emit("done", step=state.step, samples=state.samples, size=hvd.size(), rank=hvd.rank(),
     w=[float(v) for v in w.numpy()])
hvd.shutdown()

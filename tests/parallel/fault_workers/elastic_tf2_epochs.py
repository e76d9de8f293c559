"""A Horovod elastic TF2 script, as Horovod documents one (DistributedGradientTape in a
tf.function, TensorFlowKerasState, @hvd.elastic.run, a commit after every batch), driven
by tests/parallel/test_elastic_hosts.py on the namespace cluster.

    tfhvdrun -np 2 --max-np 4 --host-discovery-script ./discover.sh \\
        python elastic_tf2_epochs.py --dir DIR [--fail-host h1 --fail-how raise]

A linear model learns from a global batch of 8 samples per step, split evenly between
the ranks of the moment; the gradient is averaged, so the weights do not depend on the
number of ranks and every (epoch, batch) step applied exactly once gives the weights the
test computes with numpy. ``--fail-host H``: at the start of epoch --fail-epoch the
process with local rank 0 on host H (every process with --fail-all) raises, or SIGKILLs
itself, or cuts its host off the network (``cut``: iptables DROP of everything through
eth0, inside the host's namespace) and trains on, as a host whose link failed would.
``--mark-epochs``: rank 0 creates DIR/epoch<N>.done after epoch N (the test's
discovery script reads them); ``--want-size E:S``: epoch E starts once the job has S
ranks (committing while it waits, which picks up joining ranks). Every process appends
JSON events to DIR/rank<id>.events (id: the rank the launcher started it as).
"""

import argparse
import os
import signal
import socket
import subprocess
import time

from events import append_event

parser = argparse.ArgumentParser()
parser.add_argument("--dir", required=True)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batches", type=int, default=3)
parser.add_argument("--fail-host", default=None)
parser.add_argument("--fail-epoch", type=int, default=1)
parser.add_argument("--fail-how", choices=["raise", "kill", "cut"], default="raise")
parser.add_argument("--fail-all", action="store_true")
parser.add_argument("--mark-epochs", action="store_true")
parser.add_argument("--want-size", action="append", default=[], metavar="EPOCH:SIZE")
ARGS = parser.parse_args()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tf_hvd as hvd  # noqa: E402

GLOBAL_BATCH, LR = 8, 0.1
WANT = dict(tuple(int(v) for v in w.split(":")) for w in ARGS.want_size)


def global_batch(epoch, batch):
    """The step's samples (the test builds the same): x of shape [8, 4], y of [8, 1]."""
    rows = (epoch * 100 + batch * 10 + np.arange(GLOBAL_BATCH))[:, None] * 4 + np.arange(4)
    x = np.sin(0.1 * rows).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32) + 0.5).astype(np.float32)
    return x, y


hvd.init()
MY_ID = int(os.environ.get("TF_HVD_ELASTIC_ID", hvd.rank()))
HOST = socket.gethostname()


def emit(event, **fields):
    fields.update(event=event, id=MY_ID, host=HOST, size=hvd.size(), rank=hvd.rank(),
                  local=[hvd.local_rank(), hvd.local_size()],
                  cross=[hvd.cross_rank(), hvd.cross_size()])
    append_event(ARGS.dir, MY_ID, fields)


model = tf.keras.Sequential([tf.keras.Input((4,)),
                             tf.keras.layers.Dense(1, kernel_initializer="zeros")])
optimizer = tf.keras.optimizers.SGD(LR)


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
    tape = hvd.DistributedGradientTape(tape)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


def maybe_fail(state):
    if state.epoch != ARGS.fail_epoch or state.batch != 0:
        return
    if not ARGS.fail_all and (HOST != ARGS.fail_host or hvd.local_rank() != 0):
        return
    emit("failing", epoch=state.epoch, how=ARGS.fail_how)
    if ARGS.fail_how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if ARGS.fail_how == "cut":
        for chain, flag in (("INPUT", "-i"), ("OUTPUT", "-o")):
            subprocess.run(["iptables", "-A", chain, flag, "eth0", "-j", "DROP"], check=True)
        return
    raise RuntimeError("rank %d on %s fails at epoch %d on purpose" % (hvd.rank(), HOST,
                                                                      state.epoch))


def wait_for_size(state, size):
    deadline = time.monotonic() + 120
    while hvd.size() != size:
        if time.monotonic() > deadline:
            raise RuntimeError("epoch %d: still %d ranks, not %d" % (state.epoch, hvd.size(),
                                                                      size))
        time.sleep(0.2)
        state.commit()


@hvd.elastic.run
def train(state):
    emit("train_begins", epoch=state.epoch, batch=state.batch)
    while state.epoch < ARGS.epochs:
        if state.epoch in WANT:
            wait_for_size(state, WANT[state.epoch])
        while state.batch < ARGS.batches:
            maybe_fail(state)
            x, y = global_batch(state.epoch, state.batch)
            n = GLOBAL_BATCH // hvd.size()
            shard = slice(hvd.rank() * n, (hvd.rank() + 1) * n)
            train_step(tf.constant(x[shard]), tf.constant(y[shard]))
            emit("batch", epoch=state.epoch, batch=state.batch)
            state.batch += 1
            state.commit()
        if ARGS.mark_epochs and hvd.rank() == 0:
            open(os.path.join(ARGS.dir, "epoch%d.done" % state.epoch), "a").close()
        state.epoch += 1
        state.batch = 0


state = hvd.elastic.TensorFlowKerasState(model, optimizer, epoch=0, batch=0)
state.register_reset_callbacks([lambda: emit("reset", epoch=state.epoch, batch=state.batch)])
train(state)
emit("done", epoch=state.epoch, batch=state.batch,
     weights=[float(v) for v in model.get_weights()[0].ravel()] +
     [float(model.get_weights()[1][0])])
hvd.shutdown()

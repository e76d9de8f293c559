"""A Horovod elastic TF2 test program with the interface and the per-epoch records of
Horovod's test/integration/data/elastic_tensorflow2_main.py (written here, not copied):
a small Keras model trained with a DistributedGradientTape step, an ObjectState-style
``TensorFlowKerasState(model, optimizer, batch, epoch, commits, rendezvous)``, a commit
every --batches-per-commit batches and at the end of each epoch, and rank 0 appending one
JSON line per finished epoch to --logfile:

    {"epoch", "batch", "commits", "hostname", "start_rank", "rank", "size", "rendezvous"}

``start_rank`` is HOROVOD_RANK as the process read it after ``hvd.init()`` (the rank the
launcher started it as); ``rendezvous`` counts the calls of the elastic function (1 + the
resets the state went through, carried with the state).

Added for tf_hvd's tests: ``--slow-start-from R --slow-start S``: a process started as
rank R or later sleeps S seconds before importing TensorFlow (a newcomer on a real
cluster takes long to start); ``--pid-dir D``: each process writes its pid to
D/pid.<start rank> (a test's discovery script kills holders by it).
"""

import argparse
import json
import os
import socket
import time

parser = argparse.ArgumentParser()
parser.add_argument("--batches-per-epoch", type=int, default=10)
parser.add_argument("--batches-per-commit", type=int, default=1)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--epoch-wait", type=float, default=0)
parser.add_argument("--logfile", required=True)
parser.add_argument("--exit-schedule", default="{}")
parser.add_argument("--exit-mode", choices=["exception", "kill"], default="exception")
parser.add_argument("--slow-start-from", type=int, default=None)
parser.add_argument("--slow-start", type=float, default=0.0)
parser.add_argument("--pid-dir", default=None)
ARGS = parser.parse_args()

START_RANK = int(os.environ.get("HOROVOD_RANK", "0"))
if ARGS.pid_dir:
    with open(os.path.join(ARGS.pid_dir, "pid.%d" % START_RANK), "w") as f:
        f.write("%d\n" % os.getpid())
if ARGS.slow_start_from is not None and START_RANK >= ARGS.slow_start_from:
    time.sleep(ARGS.slow_start)

import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

import tf_hvd as hvd  # noqa: E402

hvd.init()
START_RANK = int(os.environ.get("HOROVOD_RANK", "0"))  # read after init, as Horovod's does
HOST = socket.gethostname()
EXITS = {tuple(json.loads("[%s]" % k.strip("()"))): v
         for k, v in json.loads(ARGS.exit_schedule or "{}").items()}

LR = 0.001
features = tf.random.stateless_uniform([32, 2], seed=[1, 2])
labels = tf.one_hot(tf.random.stateless_uniform([32], seed=[3, 4], maxval=2,
                                                dtype=tf.int64), 2)
model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2, activation="softmax")])
optimizer = keras.optimizers.SGD(LR * hvd.size())


@tf.function
def train_step(distributed=True):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(keras.losses.categorical_crossentropy(
            labels, model(features, training=True)))
    if distributed:
        tape = hvd.DistributedGradientTape(tape)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))


train_step(distributed=False)  # builds the model and the optimizer's variables


def maybe_exit(epoch, batch):
    if START_RANK in EXITS.get((epoch, batch), ()):
        if ARGS.exit_mode == "kill":
            os.kill(os.getpid(), 9)
        raise RuntimeError("scheduled exit at epoch %d batch %d (start rank %d, rank %d)"
                           % (epoch, batch, START_RANK, hvd.rank()))


def record(state):
    with open(ARGS.logfile, "a") as f:
        f.write(json.dumps({
            "epoch": state.epoch, "batch": state.batch, "commits": state.commits,
            "hostname": HOST, "start_rank": START_RANK, "rank": hvd.rank(),
            "size": hvd.size(), "rendezvous": state.rendezvous}) + "\n")


@hvd.elastic.run
def train(state):
    state.rendezvous += 1
    while state.epoch < ARGS.epochs:
        print("epoch %d batch %d size %d" % (state.epoch, state.batch, hvd.size()),
              flush=True)
        while state.batch < ARGS.batches_per_epoch:
            maybe_exit(state.epoch, state.batch)
            train_step()
            state.batch += 1
            if state.batch % ARGS.batches_per_commit == 0:
                state.commits += 1
                state.commit()
        if hvd.rank() == 0:
            record(state)
        if ARGS.epoch_wait:
            time.sleep(ARGS.epoch_wait)
        state.epoch += 1
        state.batch = 0
        state.commits += 1
        state.commit()


def on_reset():
    optimizer.learning_rate.assign(LR * hvd.size())


state = hvd.elastic.TensorFlowKerasState(model, optimizer, batch=0, epoch=0, commits=0,
                                         rendezvous=0)
state.register_reset_callbacks([on_reset])
train(state)

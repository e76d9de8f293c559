"""Keras model.fit under tf_hvd.keras.elastic (driven by tests/parallel/test_elastic.py).

    tfhvdrun -np 3 --min-np 2 python elastic_keras.py --dir DIR

8 batches an epoch, 3 epochs; the callbacks are in Horovod's example's order (commit
first). Rank 1 SIGKILLs itself as batch 4 of epoch 2 begins (state: epoch 1, batch 3);
the others' fit fails, they roll back to that commit and fit the rest at np=2. Every
rank appends JSON events to DIR/rank<r>.events (r: its first rank): each batch's
counters, the state and optimizer step after a reset, and the final weights.
"""

import argparse
import os
import signal

parser = argparse.ArgumentParser()
parser.add_argument("--dir", required=True)
parser.add_argument("--epochs", type=int, default=3)
ARGS = parser.parse_args()

import tensorflow as tf  # noqa: E402

import tf_hvd.keras as hvd  # noqa: E402
from events import append_event, toy_regression  # noqa: E402

keras = tf.keras  # Keras 3, or tf-keras 2 with TF_USE_LEGACY_KERAS=1
hvd.init()
FIRST_RANK = int(os.environ.get("TF_HVD_ELASTIC_ID", hvd.rank()))
keras.utils.set_random_seed(7)


def emit(event, **fields):
    fields.update(event=event, first_rank=FIRST_RANK)
    append_event(ARGS.dir, FIRST_RANK, fields)


x, y, model = toy_regression(keras, 100 + FIRST_RANK)
model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.05, momentum=0.5)),
              loss="mse")
state = hvd.elastic.KerasState(model, batch=0, epoch=0)


def _iterations():
    return int(model.optimizer.iterations.numpy())


state.register_reset_callbacks([lambda: emit(
    "reset", size=hvd.size(), rank=hvd.rank(), epoch=state.epoch, batch=state.batch,
    iterations=_iterations())])


class Watch(keras.callbacks.Callback):
    def on_train_batch_begin(self, batch, logs=None):
        if FIRST_RANK == 1 and (state.epoch, state.batch) == (1, 3):
            emit("killing_myself", epoch=state.epoch, batch=state.batch)
            os.kill(os.getpid(), signal.SIGKILL)

    def on_train_batch_end(self, batch, logs=None):
        emit("batch", epoch=state.epoch, batch=state.batch, size=hvd.size())


callbacks = [hvd.elastic.CommitStateCallback(state),
             hvd.elastic.UpdateBatchStateCallback(state),
             hvd.elastic.UpdateEpochStateCallback(state), Watch()]


@hvd.elastic.run
def train(state):
    state.model.fit(x, y, batch_size=8, epochs=ARGS.epochs - state.epoch, shuffle=False,
                    callbacks=callbacks, verbose=0)


train(state)
emit("done", epoch=state.epoch, batch=state.batch, iterations=_iterations(),
     size=hvd.size(), weights=[float(v) for w in model.get_weights() for v in w.ravel()])
hvd.shutdown()

"""Keras fit that resumes from keras.callbacks.BackupAndRestore after tfhvdrun restarts
it (driven by tests/parallel/test_restarts.py).

    tfhvdrun -np 2 --max-restarts 1 python restart_keras.py --dir DIR [--kill-once MARKER]

Deterministic data, seeds and ops. With --kill-once, rank 1 SIGKILLs itself at batch 3
of epoch 2 (index 1) unless MARKER exists (it creates MARKER first), so only the first
run dies. Every rank appends JSON events to DIR/rank<r>.events (the launcher's restart
count, each epoch begun and ended) and saves its final weights to DIR/weights.rank<r>.npy.
"""

import argparse
import os
import signal

parser = argparse.ArgumentParser()
parser.add_argument("--dir", required=True)
parser.add_argument("--kill-once", default=None)
parser.add_argument("--epochs", type=int, default=3)
ARGS = parser.parse_args()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

import tf_hvd.keras as hvd  # noqa: E402
from events import append_event, toy_regression  # noqa: E402

hvd.init()
RANK = hvd.rank()
RESTART = int(os.environ.get("TF_HVD_RESTART_COUNT", "0"))
keras.utils.set_random_seed(7)
tf.config.experimental.enable_op_determinism()


def emit(event, **fields):
    fields.update(event=event, rank=RANK, restart=RESTART)
    append_event(ARGS.dir, RANK, fields)


x, y, model = toy_regression(keras, 100 + RANK)
model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.05)), loss="mse")


class Watch(keras.callbacks.Callback):
    epoch = None

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch
        emit("epoch_begin", epoch=epoch)

    def on_epoch_end(self, epoch, logs=None):
        emit("epoch_end", epoch=epoch)

    def on_train_batch_begin(self, batch, logs=None):
        if ARGS.kill_once and RANK == 1 and self.epoch == 1 and batch == 3 and \
                not os.path.exists(ARGS.kill_once):
            open(ARGS.kill_once, "w").close()
            emit("killing_myself", epoch=self.epoch, batch=batch)
            os.kill(os.getpid(), signal.SIGKILL)


model.fit(x, y, batch_size=8, epochs=ARGS.epochs, shuffle=False, verbose=0,
          callbacks=[keras.callbacks.BackupAndRestore(os.path.join(ARGS.dir, "backup",
                                                                   "rank%d" % RANK)),
                     hvd.callbacks.BroadcastGlobalVariablesCallback(0), Watch()])
np.save(os.path.join(ARGS.dir, "weights.rank%d.npy" % RANK),
        np.concatenate([w.reshape(-1) for w in model.get_weights()]))
emit("done")

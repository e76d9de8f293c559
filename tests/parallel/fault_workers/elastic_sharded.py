"""Keras model.fit under tf_hvd.keras.elastic with Adam, sharded or not, while the job
grows from 2 ranks to 3 and shrinks back to 2 (driven by tests/parallel/test_elastic_sharded.py).

    tfhvdrun -np 2 --min-np 2 --max-np 3 --host-discovery-script discover.sh \\
        python elastic_sharded.py --dir DIR --grow-marker FILE [--sharded]

3 epochs of 8 batches, a commit after every batch. After batch 2 of epoch 1, rank 0
creates FILE (the discovery script then lists a third host, 127.0.0.3:1, where the
launcher starts a rank) and every rank commits without training until the newcomer has
joined (HostsUpdatedInterrupt at a commit): batches 3-8 of epoch 1 run at np=3. The
newcomer SIGKILLs itself as batch 4 of epoch 2 begins; the others roll back to the commit
after batch 3 and finish at np=2. The schedule is the same with or without --sharded.

Each time ``train`` begins (after every sync) and at the end, every rank appends an event
to DIR/rank<first rank>.events: the counters, the weights and the optimizer's whole
state as an unsharded Adam holds it (a sharded optimizer's gathered with
``gather_state(root_rank=None)``, every rank), and a sharded optimizer's slot shapes
on this rank.
"""

import argparse
import os
import signal
import time

parser = argparse.ArgumentParser()
parser.add_argument("--dir", required=True)
parser.add_argument("--grow-marker", required=True)
parser.add_argument("--sharded", action="store_true")
ARGS = parser.parse_args()

import tensorflow as tf  # noqa: E402

import tf_hvd.keras as hvd  # noqa: E402
from events import append_event, toy_regression  # noqa: E402

keras = tf.keras
hvd.init()
FIRST_RANK = int(os.environ.get("TF_HVD_ELASTIC_ID", hvd.rank()))
keras.utils.set_random_seed(7)

x, y, model = toy_regression(keras, 100 + FIRST_RANK)
opt = hvd.DistributedOptimizer(keras.optimizers.Adam(0.01), sharded=ARGS.sharded)
model.compile(optimizer=opt, loss="mse")
state = hvd.elastic.KerasState(model, batch=0, epoch=0)


def emit(event):
    if ARGS.sharded:
        whole = opt.gather_state(root_rank=None)   # every rank takes part
        shapes = [list(v.shape) for v in opt.variables]
    else:
        whole = [v.numpy() for v in opt.variables]
        shapes = None
    append_event(ARGS.dir, FIRST_RANK, dict(
        event=event, first_rank=FIRST_RANK, size=hvd.size(), rank=hvd.rank(),
        epoch=state.epoch, batch=state.batch, iterations=int(opt.iterations.numpy()),
        weights=[float(v) for w in model.get_weights() for v in w.ravel()],
        optimizer=[float(v) for w in whole for v in w.ravel()], shapes=shapes))


class Schedule(keras.callbacks.Callback):
    def on_train_batch_begin(self, batch, logs=None):
        if FIRST_RANK == 2 and (state.epoch, state.batch) == (2, 3):
            os.kill(os.getpid(), signal.SIGKILL)

    def on_train_batch_end(self, batch, logs=None):
        if (state.epoch, state.batch) == (1, 2) and hvd.size() == 2:
            if FIRST_RANK == 0:
                open(ARGS.grow_marker, "a").close()
            while True:  # until the newcomer joins: HostsUpdatedInterrupt at a commit
                time.sleep(0.2)
                state.commit()


callbacks = [hvd.elastic.CommitStateCallback(state),
             hvd.elastic.UpdateBatchStateCallback(state),
             hvd.elastic.UpdateEpochStateCallback(state), Schedule()]


@hvd.elastic.run
def train(state):
    emit("synced")
    state.model.fit(x, y, batch_size=8, epochs=3 - state.epoch, shuffle=False,
                    callbacks=callbacks, verbose=0)


train(state)
emit("done")
hvd.shutdown()

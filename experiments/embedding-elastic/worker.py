"""One rank of the elastic DistributedEmbedding run (run.py starts the jobs).

Keras model.fit under tf_hvd.keras.elastic, Adagrad, a one-hot feature into a table of
40 x 4 and a Dense head, while the job grows from 2 ranks to 3 and shrinks back to 2
(the schedule of tests/parallel/fault_workers/elastic_sharded.py). ``--plain`` uses a
keras.layers.Embedding instead (replicated, dense gradients: Keras' Adagrad then leaves rows without gradient
unchanged, so the two jobs must agree).
Every rank appends to DIR/rank<first rank>.events, at each sync and at the end, the
counters, the whole table (gathered) and the head's weights.
"""

import argparse
import os
import signal
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--dir", required=True)
parser.add_argument("--grow-marker", required=True)
parser.add_argument("--plain", action="store_true")
ARGS = parser.parse_args()

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "parallel", "fault_workers"))

import keras  # noqa: E402
import numpy as np  # noqa: E402

import tf_hvd.keras as hvd  # noqa: E402
from events import append_event  # noqa: E402
from tf_hvd.keras.layers import DistributedEmbedding, FeatureConfig, TableConfig  # noqa: E402

V, D = 40, 4
hvd.init()
FIRST_RANK = int(os.environ.get("TF_HVD_ELASTIC_ID", hvd.rank()))
keras.utils.set_random_seed(7)
rs = np.random.RandomState(100 + FIRST_RANK)
x = rs.randint(0, V, size=64).astype(np.int32)
y = rs.randn(64, 1).astype(np.float32)
table0 = np.random.RandomState(3).randn(V, D).astype(np.float32) * 0.3

ids = keras.Input((), dtype="int32", name="f")
if ARGS.plain:
    emb = keras.layers.Embedding(V, D, name="emb")
    vec = emb(ids)
else:
    emb = DistributedEmbedding(FeatureConfig("f", TableConfig("t", V, D), (None,), (None, D)),
                               name="emb")
    vec = emb({"f": ids})
head = keras.layers.Dense(1, name="head")
model = keras.Model(ids if ARGS.plain else {"f": ids}, head(vec))
if ARGS.plain:
    emb.set_weights([table0])
else:
    emb.set_table("t", table0)
head.set_weights([np.full((D, 1), 0.1, np.float32), np.zeros(1, np.float32)])
# sparse_as_dense for the replicated table: Keras' Adagrad squares an IndexedSlices'
# duplicate parts one by one (sum of squares, not square of the sum); dense gradients
# give the semantics both jobs should share
opt = hvd.DistributedOptimizer(keras.optimizers.Adagrad(0.1), sparse_as_dense=ARGS.plain)
model.compile(optimizer=opt, loss="mse")
state = hvd.elastic.KerasState(model, batch=0, epoch=0)


def table():
    return emb.get_weights()[0] if ARGS.plain else emb.get_table("t")


def emit(event):
    append_event(ARGS.dir, FIRST_RANK, dict(
        event=event, first_rank=FIRST_RANK, size=hvd.size(), rank=hvd.rank(),
        epoch=state.epoch, batch=state.batch, iterations=int(opt.iterations.numpy()),
        table=table().ravel().tolist(),
        rows_held=None if ARGS.plain else int(emb._hvd.tables["t"].shard.shape[0]),
        head=[float(v) for w in head.get_weights() for v in w.ravel()]))


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
    data = x if ARGS.plain else {"f": x}
    state.model.fit(data, y, batch_size=8, epochs=3 - state.epoch, shuffle=False,
                    callbacks=callbacks, verbose=0)


train(state)
emit("done")
hvd.shutdown()

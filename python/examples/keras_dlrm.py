"""A small DLRM on synthetic click data, its embedding tables sharded over the ranks.

    tfhvdrun -np 2 python python/examples/keras_dlrm.py

Four categorical features (Zipf-distributed ids) look up four tables held by a
tf_hvd.keras.layers.DistributedEmbedding (each rank holds 1/N of every table's rows
and of Adagrad's accumulators), 13 dense features go through a bottom MLP, and a top
MLP predicts the click. The click is drawn from a hidden per-id score, so the model
can learn it: rank 0 prints the test AUC (0.727 at np=2 with the defaults; 0.5 is
chance) and saves the model with whole tables (hvd.save_model) to --checkpoint.
"""

import argparse

import keras
import numpy as np

import tf_hvd.keras as hvd
from tf_hvd.keras.layers import DistributedEmbedding, FeatureConfig, TableConfig

TABLES = 4
DENSE = 13


def synthetic(rank, size, samples, rows, seed=0):
    """This rank's share of ``samples`` click records (the same hidden scores on
    every rank, so every rank learns the same function)."""
    hidden = np.random.RandomState(seed)
    scores = [hidden.randn(rows).astype(np.float32) for _ in range(TABLES)]
    weights = hidden.randn(DENSE).astype(np.float32) * 0.5
    rs = np.random.RandomState(seed + 1 + rank)
    n = samples // size
    ids = [((rs.zipf(1.2, size=n) - 1) % rows).astype(np.int32) for _ in range(TABLES)]
    dense = rs.randn(n, DENSE).astype(np.float32)
    logit = sum(s[i] for s, i in zip(scores, ids)) + dense @ weights
    clicks = (rs.rand(n) < 1.0 / (1.0 + np.exp(-logit))).astype(np.float32)
    x = {"numeric": dense}
    x.update(("c%d" % t, ids[t]) for t in range(TABLES))
    return x, clicks[:, None]


def dlrm(rows, dim):
    dense_in = keras.Input((DENSE,), name="numeric")
    id_in = {"c%d" % t: keras.Input((), dtype="int32", name="c%d" % t) for t in range(TABLES)}
    features = {"c%d" % t: FeatureConfig("c%d" % t, TableConfig("table%d" % t, rows, dim),
                                         input_shape=(None,), output_shape=(None, dim))
                for t in range(TABLES)}
    vectors = DistributedEmbedding(features, name="embedding")(id_in)
    bottom = keras.layers.Dense(64, activation="relu")(dense_in)
    bottom = keras.layers.Dense(dim, activation="relu")(bottom)
    # DLRM's interaction: the pairwise dot products of the vectors, with the bottom output
    stacked = keras.ops.stack([bottom] + [vectors["c%d" % t] for t in range(TABLES)], axis=1)
    dots = keras.ops.reshape(keras.ops.matmul(stacked, keras.ops.transpose(stacked, (0, 2, 1))),
                             (-1, (TABLES + 1) ** 2))
    top = keras.layers.Concatenate()([bottom, dots])
    top = keras.layers.Dense(64, activation="relu")(top)
    click = keras.layers.Dense(1, activation="sigmoid")(top)
    return keras.Model([dense_in] + list(id_in.values()), click)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--samples", type=int, default=65536, help="training, all ranks")
    parser.add_argument("--rows", type=int, default=20000, help="per table")
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=512, help="per rank")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--checkpoint", default="checkpoints/keras_dlrm.keras")
    args = parser.parse_args()

    hvd.init()
    keras.utils.set_random_seed(1234)   # same dense weights on every rank
    x, y = synthetic(hvd.rank(), hvd.size(), args.samples, args.rows)
    x_test, y_test = synthetic(0, 1, 8192, args.rows, seed=0)

    model = dlrm(args.rows, args.dim)
    # The tables' rows are updated on the rank that owns them with Adagrad's sparse rule;
    # the dense layers' gradients are averaged as usual.
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adagrad(args.lr)),
                  loss="binary_crossentropy", metrics=[keras.metrics.AUC(name="auc")])
    model.fit(x, y, batch_size=args.batch_size, epochs=args.epochs,
              callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                         hvd.callbacks.MetricAverageCallback()],
              verbose=2 if hvd.rank() == 0 else 0)
    # Every rank evaluates its share of the test set; the AUC's counts are summed.
    share = slice(hvd.rank() * len(y_test) // hvd.size(),
                  (hvd.rank() + 1) * len(y_test) // hvd.size())
    auc = keras.metrics.AUC()
    auc.update_state(y_test[share], model.predict(
        {k: v[share] for k, v in x_test.items()}, batch_size=2048, verbose=0))
    for v in auc.variables:
        v.assign(hvd.allreduce(v, op=hvd.Sum, name="auc_" + v.name))
    hvd.save_model(model, args.checkpoint)   # every rank: whole tables to rank 0
    if hvd.rank() == 0:
        print("test AUC: %.3f" % float(auc.result()))


if __name__ == "__main__":
    main()

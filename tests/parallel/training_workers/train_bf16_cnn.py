"""bf16 gradient exchange trains a CNN as float32 exchange does.

A small CNN on scikit-learn's 8x8 digits (python/examples/digits_data.py: 1437 training
images sharded over the ranks, 360 test images), fitted twice from the same initial
weights with hvd.DistributedOptimizer(Adam): once exchanging float32 gradients, once
with compression=hvd.Compression.bf16. Checks on every rank: weights bit-identical
across ranks after each fit, both reach the accuracy bar, and bf16's final test
accuracy and training loss are within the stated tolerance of float32's.

    python -m tf_hvd.runner -np 2 python train_bf16_cnn.py
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))),
                                "python", "examples"))

import keras  # noqa: E402
import numpy as np  # noqa: E402

import digits_data  # noqa: E402
import tf_hvd.keras as hvd  # noqa: E402
from trainlib import Checks  # noqa: E402

EPOCHS, BATCH, LR = 4, 16, 2e-3
ACCURACY_BAR = 0.90        # both exchanges
ACCURACY_TOLERANCE = 0.03  # |bf16 - float32| test accuracy
# the last epoch's training loss: within 25% of float32's, or 0.02 when both are small
LOSS_TOLERANCE, LOSS_FLOOR = 0.25, 0.02

hvd.init()
C = Checks(hvd)


def cnn():
    keras.utils.set_random_seed(7)  # the same initial weights for both fits
    return keras.Sequential([
        keras.Input((8, 8, 1)),
        keras.layers.Conv2D(16, 3, activation="relu", padding="same"),
        keras.layers.Conv2D(32, 3, activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10),
    ])


def fit(compression):
    (x, y), (x_test, y_test) = digits_data.load(hvd.rank(), hvd.size())
    model = cnn()
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(LR * hvd.size()),
                                                     compression=compression),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    history = model.fit(x.reshape(-1, 8, 8, 1), y, batch_size=BATCH, epochs=EPOCHS,
                        shuffle=False, verbose=0,
                        callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                                   hvd.callbacks.MetricAverageCallback()])
    _, accuracy = model.evaluate(x_test.reshape(-1, 8, 8, 1), y_test, verbose=0)
    return model, history.history["loss"][-1], accuracy


def compare():
    results = {}
    for name, compression in (("float32", hvd.Compression.none),
                              ("bf16", hvd.Compression.bf16)):
        model, loss, accuracy = fit(compression)
        C.same_on_all_ranks("%s weights" % name, model.get_weights())
        C.expect(accuracy >= ACCURACY_BAR, "%s accuracy" % name,
                 "test accuracy %.4f < %.2f" % (accuracy, ACCURACY_BAR))
        results[name] = (loss, accuracy)
        C.log("CNN %s exchange: last epoch loss %.4f, test accuracy %.4f"
              % (name, loss, accuracy))
    (loss32, acc32), (loss16, acc16) = results["float32"], results["bf16"]
    C.expect(abs(acc16 - acc32) <= ACCURACY_TOLERANCE, "bf16 accuracy vs float32",
             "%.4f vs %.4f" % (acc16, acc32))
    C.expect(abs(loss16 - loss32) <= max(LOSS_TOLERANCE * loss32, LOSS_FLOOR),
             "bf16 loss vs float32",
             "%.4f vs %.4f" % (loss16, loss32))


C.section("bf16_cnn", compare)
sys.exit(C.finish())

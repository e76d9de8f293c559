"""Keras 3 model.fit on scikit-learn's digits, data-parallel with tf_hvd.

    tfhvdrun -np 2 python python/examples/keras_digits.py

Reaches a test accuracy of at least 0.95 at np=2 with the defaults (15 epochs).
"""

import argparse
import os

import keras

import tf_hvd.keras as hvd
from digits_data import load


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.001, help="for one process")
    parser.add_argument("--warmup-epochs", type=int, default=3)
    parser.add_argument("--checkpoint-dir", default="checkpoints/keras_digits")
    args = parser.parse_args()

    # Horovod: initialize.
    hvd.init()
    (x_train, y_train), (x_test, y_test) = load(hvd.rank(), hvd.size())
    keras.utils.set_random_seed(1234 + hvd.rank())

    model = keras.Sequential([
        keras.Input((64,)),
        keras.layers.Dense(128, activation="relu"),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10, activation="softmax"),
    ])
    # Horovod: scale the learning rate by the number of workers, wrap the optimizer.
    scaled_lr = args.lr * hvd.size()
    opt = hvd.DistributedOptimizer(keras.optimizers.Adam(scaled_lr))
    model.compile(optimizer=opt, loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])

    callbacks = [
        # Horovod: start every rank from rank 0's weights (after the first
        # batch, so the optimizer's state exists too).
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        # Horovod: average the epoch metrics over ranks.
        hvd.callbacks.MetricAverageCallback(),
        # Horovod: ramp the learning rate up to scaled_lr over a few epochs.
        hvd.callbacks.LearningRateWarmupCallback(
            initial_lr=scaled_lr, warmup_epochs=args.warmup_epochs,
            verbose=1 if hvd.rank() == 0 else 0),
    ]
    # Horovod: save checkpoints only on rank 0.
    if hvd.rank() == 0:
        os.makedirs(args.checkpoint_dir, exist_ok=True)
        callbacks.append(keras.callbacks.ModelCheckpoint(
            os.path.join(args.checkpoint_dir, "checkpoint.keras")))

    model.fit(x_train, y_train, batch_size=args.batch_size, epochs=args.epochs,
              validation_data=(x_test, y_test), callbacks=callbacks,
              verbose=2 if hvd.rank() == 0 else 0)

    loss, accuracy = model.evaluate(x_test, y_test, verbose=0)
    if hvd.rank() == 0:
        print("test loss: %.4f" % loss)
        print("test accuracy: %.4f" % accuracy)


if __name__ == "__main__":
    main()

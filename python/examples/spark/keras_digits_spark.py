"""keras_digits.py on Spark: KerasEstimator.fit on a DataFrame of scikit-learn's digits,
then KerasModel.transform on the test rows, in Spark tasks.

    python python/examples/spark/keras_digits_spark.py                  # local-cluster[2,1,1024]
    python python/examples/spark/keras_digits_spark.py --master spark://h1:7077 \\
        --store /shared/tf_hvd_store

Same data, split, model, batch size, learning rate and warm-up as keras_digits.py at
np=2 (reaches a test accuracy of at least 0.95 with the defaults). Needs pyspark and
Java 17 (tools/setup.sh installs both).
"""

import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from digits_data import load  # noqa: E402  (the plain examples' split)


def digits_frames(spark):
    """(train, test) DataFrames: ``features`` (Spark ML vectors of 64 pixels), ``label``."""
    from pyspark.ml.linalg import Vectors
    (x_train, y_train), (x_test, y_test) = load(0, 1)

    def frame(x, y):
        rows = [(Vectors.dense(f.astype(float)), int(l)) for f, l in zip(x, y)]
        return spark.createDataFrame(rows, ["features", "label"])
    return frame(x_train, y_train), frame(x_test, y_test)


def make_model():
    import keras
    return keras.Sequential([
        keras.Input((64,)),
        keras.layers.Dense(128, activation="relu"),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10, activation="softmax"),
    ])


def estimator(store, num_proc=2, epochs=15, batch_size=32, lr=0.001, warmup_epochs=3,
              verbose=2):
    """The estimator keras_digits.py's training corresponds to, at ``num_proc`` ranks."""
    import keras
    import tf_hvd.keras as hvd
    from tf_hvd.spark.keras import KerasEstimator
    keras.utils.set_random_seed(1234)
    scaled_lr = lr * num_proc
    return KerasEstimator(
        num_proc=num_proc, model=make_model(), optimizer=keras.optimizers.Adam(scaled_lr),
        loss="sparse_categorical_crossentropy", metrics=["accuracy"],
        feature_cols=["features"], label_cols=["label"], batch_size=batch_size,
        epochs=epochs, random_seed=1234, store=store, verbose=verbose,
        callbacks=[hvd.callbacks.LearningRateWarmupCallback(
            initial_lr=scaled_lr, warmup_epochs=warmup_epochs, verbose=0)])


def accuracy(predictions):
    """The share of rows whose most likely class is the label."""
    rows = predictions.select("label", "label__output").collect()
    return float(np.mean([int(np.argmax(r["label__output"])) == r["label"] for r in rows]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--master", default="local-cluster[2,1,1024]")
    parser.add_argument("--num-proc", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--store", default=None, help="default: a temporary directory")
    args = parser.parse_args()

    from pyspark.sql import SparkSession
    from tf_hvd.spark.keras import Store
    spark = SparkSession.builder.master(args.master).appName("tf_hvd keras digits") \
        .config("spark.ui.enabled", "false").getOrCreate()
    try:
        train, test = digits_frames(spark)
        store = Store.create(args.store or tempfile.mkdtemp(prefix="tf_hvd_store_"))
        model = estimator(store, num_proc=args.num_proc, epochs=args.epochs).fit(train)
        print("history (accuracy per epoch):",
              ["%.4f" % a for a in model.getHistory()["accuracy"]])
        print("test accuracy: %.4f" % accuracy(model.transform(test)))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()

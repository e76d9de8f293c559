"""The dataset and model of TensorFlow's "Multi-worker training with Keras" tutorial,
kept in its shape (``mnist_dataset``, ``build_and_compile_cnn_model``) for tf_hvd.

MNIST cannot be downloaded everywhere, so the images are scikit-learn's bundled 8x8
digits (1797 images, 10 classes, nothing downloaded) in place of the 28x28 ones; the
model is the tutorial's (Reshape, Conv2D(32, 3), Flatten, Dense(128), Dense(10) logits).
The split is fixed (seed 0, stratified): 1437 training and 360 test images.

Two differences from the tutorial, both because tf_hvd leaves them to the script:

* ``mnist_dataset`` takes ``num_shards``/``shard_index`` and shards the examples itself
  (``dataset.shard``) before shuffling; MultiWorkerMirroredStrategy shards automatically.
* ``build_and_compile_cnn_model`` takes the optimizer, so that the script can wrap it in
  ``hvd.DistributedOptimizer``; its default is the tutorial's SGD.

Nothing here imports tf_hvd: one process can use it as the tutorial's single-worker
cells do.
"""

import numpy as np
import tensorflow as tf
import keras
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

IMAGE_SHAPE = (8, 8)       # the tutorial's (28, 28)


def _digits(seed=0):
    digits = load_digits()
    # The pixels are integers in [0, 16]; scale them to float32 in [0, 1] (the tutorial
    # divides MNIST's uint8 [0, 255] by 255).
    x = (digits.images / np.float32(16)).astype(np.float32)
    y = digits.target.astype(np.int64)
    return train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)


def mnist_dataset(batch_size, num_shards=1, shard_index=0, seed=0):
    """The training images as an endless dataset of ``batch_size`` batches.

    With ``num_shards`` > 1 this process keeps every ``num_shards``-th example, starting
    at ``shard_index``, so that the shards of all processes are disjoint.
    """
    x_train, _, y_train, _ = _digits()
    train_dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train))
    if num_shards > 1:
        train_dataset = train_dataset.shard(num_shards, shard_index)
    return train_dataset.shuffle(len(x_train), seed=seed).repeat().batch(batch_size)


def test_dataset(batch_size=360):
    """The 360 held-out images (the same on every process), for model.evaluate."""
    _, x_test, _, y_test = _digits()
    return tf.data.Dataset.from_tensor_slices((x_test, y_test)).batch(batch_size)


def build_and_compile_cnn_model(optimizer=None):
    """The tutorial's CNN, compiled with ``optimizer`` (default: SGD(learning_rate=0.001),
    the tutorial's)."""
    model = keras.Sequential([
        keras.Input(shape=IMAGE_SHAPE),
        keras.layers.Reshape(target_shape=IMAGE_SHAPE + (1,)),
        keras.layers.Conv2D(32, 3, activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(128, activation="relu"),
        keras.layers.Dense(10),
    ])
    model.compile(
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        optimizer=optimizer if optimizer is not None else keras.optimizers.SGD(
            learning_rate=0.001),
        metrics=["accuracy"])
    return model

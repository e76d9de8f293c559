"""An offline stand-in for ``tf.keras.datasets.mnist.load_data``.

MNIST cannot be downloaded here, so the ported Horovod examples read
scikit-learn's bundled 8x8 digits (1797 images, no download), each pixel
blown up to a 3x3 block and padded to MNIST's 28x28 uint8 format (0..255),
so the examples' models and preprocessing run unchanged.

    (x_train, y_train), (x_test, y_test) = offline_mnist.load_data()
    x_train.shape, x_train.dtype     # ((1437, 28, 28), dtype('uint8'))
"""

import numpy as np


def load_data(path=None):
    """Same return value as ``mnist.load_data``; ``path`` is accepted and
    ignored (nothing is downloaded or cached)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    digits = load_digits()
    images = digits.images * (255.0 / 16.0)                  # 0..16 -> 0..255
    images = np.kron(images, np.ones((1, 3, 3)))             # 8x8 -> 24x24
    images = np.pad(images, ((0, 0), (2, 2), (2, 2)))         # -> 28x28
    images = np.clip(np.rint(images), 0, 255).astype(np.uint8)
    labels = digits.target.astype(np.uint8)
    x_train, x_test, y_train, y_test = train_test_split(
        images, labels, test_size=0.2, random_state=0, stratify=labels)
    return (x_train, y_train), (x_test, y_test)

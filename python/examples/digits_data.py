"""scikit-learn's bundled 8x8 digits (1797 images, 10 classes; no download),
split and sharded the same way by all three examples.

The split is fixed (seed 0): 1437 training and 360 test images. Every rank
gets an equal share of the training images (a few are dropped so the shares
are equal: ranks must run the same number of steps), and the whole test set.
"""

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def load(rank, size, seed=0):
    """Returns (x_train_shard, y_train_shard), (x_test, y_test) as float32/int32."""
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)          # 64 pixels in [0, 1]
    y = digits.target.astype(np.int32)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.2, random_state=seed, stratify=y)
    per_rank = len(x_train) // size
    mine = slice(rank * per_rank, (rank + 1) * per_rank)
    return (x_train[mine], y_train[mine]), (x_test, y_test)


def epoch_batches(num_samples, batch_size, epoch, seed=0):
    """Index arrays of the full batches of one epoch, shuffled per epoch."""
    order = np.random.RandomState(seed + epoch).permutation(num_samples)
    steps = num_samples // batch_size
    return [order[i * batch_size:(i + 1) * batch_size] for i in range(steps)]

"""The weights fault_workers/elastic_tf2_epochs.py must end with (numpy), for the tests that
run it (test_elastic_hosts.py, test_liveness.py).

    expected_weights()            # every step once, any number of ranks dividing 8
    expected_weights([3, 2, 2])   # epoch 0 by three ranks, epochs 1 and 2 by two
"""

import numpy as np

EPOCHS, BATCHES, GLOBAL_BATCH, LR = 3, 3, 8, 0.1


def expected_weights(sizes=(1,) * EPOCHS):
    """The worker's linear model after every (epoch, batch) step once, epoch e run by
    sizes[e] ranks: each takes GLOBAL_BATCH // size of the step's samples and the
    gradient is averaged, so the first (GLOBAL_BATCH // size) * size samples count."""
    w, b = np.zeros((4, 1)), 0.0
    for epoch, size in enumerate(sizes):
        used = GLOBAL_BATCH // size * size
        for batch in range(BATCHES):
            rows = (epoch * 100 + batch * 10 + np.arange(used))[:, None] * 4 + np.arange(4)
            x = np.sin(0.1 * rows).astype(np.float32).astype(np.float64)
            y = x @ np.array([[1.0], [-2.0], [0.5], [3.0]]) + 0.5
            err = x @ w + b - y
            w -= LR * 2.0 * x.T @ err / used
            b -= LR * 2.0 * err.mean()
    return list(w.ravel()) + [b]

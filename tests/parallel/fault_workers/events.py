"""What the fault workers share: the JSON event log each rank appends to, and the toy
Keras regression the Keras workers train.

    from events import append_event, toy_regression
    append_event(directory, 1, {"event": "done", "rank": 1})   # DIR/rank1.events
"""

import json
import os


def append_event(directory, index, fields):
    """Appends fields as one JSON line to directory/rank<index>.events; returns the line."""
    line = json.dumps(fields, sort_keys=True)
    with open(os.path.join(directory, "rank%d.events" % index), "a") as f:
        f.write(line + "\n")
    return line


def toy_regression(keras, seed):
    """(x, y, model): 64 samples of 4 features whose target is half their sum (drawn from
    seed), and an uncompiled 4-8-1 tanh model."""
    import numpy as np
    rng = np.random.RandomState(seed)
    x = rng.randn(64, 4).astype(np.float32)
    y = (x.sum(axis=1, keepdims=True) * 0.5).astype(np.float32)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="tanh"),
                              keras.layers.Dense(1)])
    return x, y, model

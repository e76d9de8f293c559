"""What the unit tests that run the library in this one process share (a job of size 1,
no launcher): the job variables of any launcher around the test run are dropped before
tf_hvd is first imported, ``hvd.init()`` runs once per module, and the Keras tests train
one small model on one small regression set::

    from one_process import initialized, numpy_values, regression_data, small_model  # noqa: F401

    def test_fit():
        model, (x, y) = small_model(), regression_data()
        model.compile(optimizer="sgd", loss="mse")
        model.fit(x, y, verbose=0)
"""

import os

import numpy as np
import pytest

# An outer launcher's rank, PMI or Open MPI variables would make hvd.init() join its job.
for _name in [k for k in os.environ if k.startswith(("HOROVOD_", "PMI_", "OMPI_"))]:
    del os.environ[_name]

import tf_hvd as hvd  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def initialized():
    """hvd.init() for the module that imports this fixture (a no-op after the first)."""
    hvd.init()
    yield


def numpy_values(values):
    """Keras variables or tensors as numpy arrays, in order."""
    import keras
    return [keras.ops.convert_to_numpy(v) for v in values]


def small_model(seed=0):
    """Dense(7, tanh) -> Dense(1) on 5 inputs, its weights drawn from ``seed``."""
    import keras
    model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(7, activation="tanh"),
                              keras.layers.Dense(1)])
    rs = np.random.RandomState(seed)
    for v in model.weights:
        v.assign((rs.randn(*v.shape) * 0.3).astype(np.float32))
    return model


def regression_data(n=32, seed=1, target=lambda x: x.sum(axis=1, keepdims=True) * 0.3):
    """(x, y): ``n`` rows of 5 float32 inputs drawn from ``seed``, y = target(x)."""
    rs = np.random.RandomState(seed)
    x = rs.randn(n, 5).astype(np.float32)
    return x, target(x).astype(np.float32)

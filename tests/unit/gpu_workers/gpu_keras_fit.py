"""Keras fit on a GPU with hvd.DistributedOptimizer: the weights end identical on every rank
and the gradients were averaged on the GPU. Run by tests/unit/test_gpu.py."""
import numpy as np
import tensorflow as tf
import keras

import tf_hvd.keras as hvd

hvd.init()
r, n = hvd.rank(), hvd.size()
rng = np.random.default_rng(r)
x = rng.normal(size=(64, 8)).astype("float32")
y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
with tf.device("/GPU:0"):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(1, activation="sigmoid")])
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.05 * n)),
                  loss="binary_crossentropy", jit_compile=False)
    model.fit(x, y, batch_size=16, epochs=2, verbose=0,
              callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
for w in model.weights:
    assert "GPU" in w.value.device, w.value.device
flat = np.concatenate([w.numpy().ravel() for w in model.weights])
everyone = hvd.allgather(tf.constant(flat[None, :])).numpy()
assert np.isfinite(everyone).all()
for k in range(n):
    np.testing.assert_array_equal(everyone[k], everyone[0])
print("GPU-KERAS-OK rank", r, flush=True)

"""The base of tf_hvd's Keras callbacks: ``tf.keras``' Callback (Keras 3, or tf-keras 2
with ``TF_USE_LEGACY_KERAS=1``), plus what the other Keras' callback list asks of it, so
that each callback works in either Keras' ``model.fit``::

    class MyCallback(CallbackBase):
        def on_train_batch_end(self, batch, logs=None): ...
"""

from tf_hvd._keras import flavors

_keras = flavors.default_keras()


class CallbackBase(_keras.callbacks.Callback):
    """tf.keras' Callback, plus what the other Keras' callback list asks of a
    callback (tf-keras' hook flags; Keras 3 needs nothing more)."""

    _supports_tf_logs = False
    _chief_worker_only = None

    def _implements_train_batch_hooks(self):
        return True

    def _implements_test_batch_hooks(self):
        return True

    def _implements_predict_batch_hooks(self):
        return True

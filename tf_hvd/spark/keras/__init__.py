"""Horovod's ``horovod.spark.keras`` for Keras 3: :class:`KerasEstimator` (a Spark ML
Estimator) and :class:`KerasModel` (the Transformer its ``fit`` returns), with the
:class:`~tf_hvd.spark.store.Store` they keep data and checkpoints in. Needs pyspark.

    from tf_hvd.spark.keras import KerasEstimator
    model = KerasEstimator(num_proc=2, model=m, optimizer=opt, loss="mse",
                           feature_cols=["x"], label_cols=["y"], store=store).fit(df)
"""

from tf_hvd.spark.keras.estimator import KerasEstimator
from tf_hvd.spark.keras.model import KerasModel
from tf_hvd.spark.store import LocalStore, Store

__all__ = ["KerasEstimator", "KerasModel", "LocalStore", "Store"]

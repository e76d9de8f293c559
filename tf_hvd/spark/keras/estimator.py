"""KerasEstimator: Horovod's ``horovod.spark.keras.KerasEstimator`` for Keras 3, a Spark
ML Estimator whose ``fit(df)`` trains data-parallel with tf_hvd on the Spark cluster.

    from tf_hvd.spark.keras import KerasEstimator
    from tf_hvd.spark.store import Store

    est = KerasEstimator(num_proc=2, model=model, optimizer=keras.optimizers.Adam(0.002),
                         loss="sparse_categorical_crossentropy", metrics=["accuracy"],
                         feature_cols=["features"], label_cols=["label"], batch_size=32,
                         epochs=15, store=Store.create("/shared/tf_hvd_store"))
    keras_model = est.fit(train_df)              # a KerasModel (Transformer)
    predictions = keras_model.transform(test_df) # adds "label__output"

``fit`` checks the columns (ValueError for missing ones, TypeError for non-numeric ones)
and the store (ValueError when it cannot be written) before anything runs, writes the
training (and validation) rows as Parquet to the store, runs tf_hvd.spark.keras.trainer
on ``num_proc`` ranks with tf_hvd.spark.run (each rank reads its share of the files
with pyarrow; DistributedOptimizer, the broadcast and metric-averaging callbacks, then
the user's), and returns the model rank 0 checkpointed to the store.
"""

import time

from pyspark import keyword_only
from pyspark.ml import Estimator

from tf_hvd.spark import runner, slots
from tf_hvd.spark.keras import columns, params
from tf_hvd.spark.keras.model import KerasModel
from tf_hvd.spark.keras.trainer import TrainSpec, model_to_bytes, train
from tf_hvd.spark.store import Store

# Horovod's options that have no meaning here, and why.
_UNSUPPORTED = {
    "backend": "tf_hvd.spark.run starts the ranks in Spark's own tasks",
    "reader_pool_type": "the ranks read Parquet with pyarrow, not Petastorm",
    "train_reader_num_workers": "the ranks read Parquet with pyarrow, not Petastorm",
    "val_reader_num_workers": "the ranks read Parquet with pyarrow, not Petastorm",
    "transformation_fn": "transform the DataFrame with Spark before fit",
    "train_minibatch_fn": "Keras 3's fit runs the steps",
    "transformation_edit_fields": "transform the DataFrame with Spark before fit",
    "transformation_removed_fields": "transform the DataFrame with Spark before fit",
    "mp_start_method": "the ranks read Parquet with pyarrow, not Petastorm's process pool",
    "label_shapes": "a label keeps its column's shape (a number, or a fixed-length array)",
}

_PARAMS = {
    "num_proc": ("number of ranks (default: the cluster's task slots)", None),
    "model": ("the Keras model to train", None),
    "store": ("where data and checkpoints go (tf_hvd.spark.store.Store)", None),
    "custom_objects": ("custom objects for loading the model", None),
    "optimizer": ("the Keras optimizer (wrapped in DistributedOptimizer)", None),
    "loss": ("the loss (a Keras loss name or function, or one per output)", None),
    "loss_weights": ("weights of the losses of several outputs", None),
    "sample_weight_col": ("the column of sample weights", None),
    "gradient_compression": ("tf_hvd.Compression for the gradients", None),
    "metrics": ("Keras metrics", None),
    "feature_cols": ("the feature columns, one per model input", None),
    "label_cols": ("the label columns, one per model output", None),
    "validation": ("a fraction of the rows, or a column whose true rows are "
                   "validation rows", None),
    "callbacks": ("Keras callbacks (after tf_hvd's broadcast and averaging)", None),
    "batch_size": ("rows per step on each rank", 32),
    "val_batch_size": ("validation rows per step on each rank", None),
    "epochs": ("number of epochs", 1),
    "verbose": ("fit's verbosity on rank 0", 1),
    "random_seed": ("seed of the split, the shuffle and the ranks' Keras", None),
    "shuffle": ("whether each rank shuffles its rows every epoch", True),
    "shuffle_buffer_size": ("rows in a rank's shuffle buffer (default: all of its share)",
                            None),
    "inmemory_cache_all": ("accepted: a rank always holds its share in memory", True),
    "checkpoint_callback": ("a Keras callback that rank 0 adds (e.g. ModelCheckpoint)", None),
    "partitions_per_process": ("Parquet files written per rank", 4),
    "run_id": ("the run's name in the store (default keras_<time>)", None),
    "train_steps_per_epoch": ("steps per epoch (default: the rows / batch / ranks)", None),
    "validation_steps_per_epoch": ("validation steps per epoch", None),
    "backward_passes_per_step": ("batches whose gradients add up before one update", 1),
    "use_gpu": ("ranks use the GPUs Spark gives their tasks", True),
    "start_timeout": ("seconds for every rank's task to start", None),
}


class KerasEstimator(Estimator):
    """Spark ML Estimator that fits a Keras model data-parallel (see the module doc)."""

    @keyword_only
    def __init__(self, **kwargs):
        super().__init__()
        params.defaults(self)
        self.setParams(**self._input_kwargs)

    @keyword_only
    def setParams(self, **kwargs):
        """Set any of the constructor's parameters."""
        unknown = sorted(set(kwargs) - set(_PARAMS) - set(_UNSUPPORTED))
        if unknown:
            raise TypeError("KerasEstimator got unknown parameter(s) %s" % unknown)
        for name in sorted(set(kwargs) & set(_UNSUPPORTED)):
            if kwargs[name] is not None:
                raise ValueError("KerasEstimator: %s is not supported: %s"
                                 % (name, _UNSUPPORTED[name]))
        return self._set(**{k: v for k, v in kwargs.items() if k in _PARAMS})

    def _check(self, df):
        p = params.values(self)
        for name in ("model", "optimizer", "loss", "feature_cols", "label_cols", "store"):
            if p[name] is None or (name.endswith("_cols") and not p[name]):
                raise ValueError("KerasEstimator: %s is required" % name)
        roles = {"feature": list(p["feature_cols"]), "label": list(p["label_cols"])}
        if p["sample_weight_col"]:
            roles["sample weight"] = [p["sample_weight_col"]]
        columns.check(df, roles)
        validation = p["validation"]
        if isinstance(validation, str) and validation not in df.columns:
            raise ValueError("the DataFrame has no validation column %r; its columns are %s"
                             % (validation, sorted(df.columns)))
        if isinstance(validation, float) and not 0 < validation < 1:
            raise ValueError("validation must be a fraction between 0 and 1, got %r"
                             % validation)
        store = p["store"] if isinstance(p["store"], Store) else Store.create(p["store"])
        store.check_writable()
        return p, store, roles

    def _split(self, df, p):
        validation = p["validation"]
        if validation is None:
            return df, None
        if isinstance(validation, str):
            from pyspark.sql import functions as F
            flag = F.col(validation).cast("boolean")
            return df.filter(~flag), df.filter(flag)
        return tuple(df.randomSplit([1 - validation, validation], seed=p["random_seed"]))

    def _write(self, df, path, store, num_files):
        df.repartition(num_files).write.mode("overwrite").parquet(store.spark_path(path))
        return store.parquet_files(path)

    def _fit(self, df):
        p, store, roles = self._check(df)
        sc = runner.spark_context()
        num_proc = slots.resolve_num_proc(sc, p["num_proc"], runner.start_timeout_s(
            p["start_timeout"]))
        run_id = p["run_id"] or "keras_%d" % int(time.time() * 1000)
        cols = [c for cols in roles.values() for c in cols]
        train_df, val_df = self._split(columns.for_parquet(
            df, cols + ([p["validation"]] if isinstance(p["validation"], str) else [])), p)
        num_files = num_proc * max(1, int(p["partitions_per_process"]))
        train_df = train_df.select(*cols)
        train_rows = train_df.count()
        if train_rows == 0:
            raise ValueError("KerasEstimator: the DataFrame has no training rows")
        train_files = self._write(train_df, store.get_train_data_path(run_id), store,
                                  num_files)
        val_files, val_rows = [], 0
        if val_df is not None:
            val_df = val_df.select(*cols)
            val_rows = val_df.count()
            if val_rows:
                val_files = self._write(val_df, store.get_val_data_path(run_id), store,
                                        num_files)
        import keras
        spec = TrainSpec(
            model=model_to_bytes(p["model"]),
            optimizer=keras.optimizers.serialize(p["optimizer"]),
            custom_objects=p["custom_objects"], loss=p["loss"],
            loss_weights=p["loss_weights"], metrics=p["metrics"],
            gradient_compression=p["gradient_compression"],
            backward_passes_per_step=p["backward_passes_per_step"],
            callbacks=p["callbacks"], feature_cols=list(p["feature_cols"]),
            label_cols=list(p["label_cols"]), sample_weight_col=p["sample_weight_col"],
            batch_size=p["batch_size"], val_batch_size=p["val_batch_size"],
            epochs=p["epochs"], verbose=p["verbose"], random_seed=p["random_seed"],
            shuffle=p["shuffle"], shuffle_buffer_size=p["shuffle_buffer_size"],
            checkpoint_callback=p["checkpoint_callback"],
            train_steps_per_epoch=p["train_steps_per_epoch"],
            validation_steps_per_epoch=p["validation_steps_per_epoch"], store=store,
            run_id=run_id, train_files=train_files, train_rows=train_rows,
            val_files=val_files, val_rows=val_rows)
        env = runner.driver_knobs()
        if not p["use_gpu"]:
            env["CUDA_VISIBLE_DEVICES"] = ""
        result = runner.run(train, args=(spec,), num_proc=num_proc, env=env,
                            start_timeout=p["start_timeout"], verbose=min(p["verbose"], 1))[0]
        # checked against its sidecar: CheckpointError names a partial or corrupted file
        model_bytes = store.read_bytes(store.get_checkpoint_path(run_id), require_manifest=True)
        return KerasModel(model_bytes=model_bytes, feature_cols=list(p["feature_cols"]),
                          label_cols=list(p["label_cols"]),
                          custom_objects=p["custom_objects"], history=result["history"],
                          run_id=run_id, batch_size=p["batch_size"])


params.declare(KerasEstimator, _PARAMS)

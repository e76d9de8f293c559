"""The function every rank runs for KerasEstimator.fit (sent with tf_hvd.spark.run).

Each rank reads its share of the Parquet data (tf_hvd.spark.keras.reader), builds the
model from the estimator's saved one, wraps the optimizer in DistributedOptimizer and
fits with the broadcast and metric-averaging callbacks before the user's; rank 0 saves
the model to the store after every epoch (and at the end) and returns the history.

    history = tf_hvd.spark.run(train, args=(TrainSpec(...),), num_proc=2)[0]
"""

import os
import tempfile

import tf_hvd.keras as hvd
from tf_hvd.compression import Compression
from tf_hvd.spark.keras import reader


class TrainSpec(object):
    """What every rank needs (picklable): the model as .keras bytes, the optimizer's
    config, compile arguments, data locations and fit arguments."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


def model_from_bytes(data, custom_objects=None, compile=True):
    """A Keras model from its .keras file's bytes."""
    import keras
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "model.keras")
        with open(path, "wb") as f:
            f.write(data)
        return keras.saving.load_model(path, custom_objects=custom_objects, compile=compile)


def model_to_bytes(model):
    """A Keras model's .keras file as bytes."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "model.keras")
        model.save(path)
        with open(path, "rb") as f:
            return f.read()


def _checkpoint_callback(store, run_id):
    import keras

    class StoreCheckpoint(keras.callbacks.Callback):
        """Rank 0: the model to the store after every epoch, committed whole (a reader
        sees the previous epoch's model or this one: Store.write_bytes)."""

        def on_epoch_end(self, epoch, logs=None):
            store.write_bytes(store.get_checkpoint_path(run_id), model_to_bytes(self.model))
    return StoreCheckpoint()


def _rows(arrays, cols):
    return len(arrays[cols[0]])


def train(spec):
    """One rank's fit; rank 0 returns {"history": ..., "steps_per_epoch": ...}."""
    import keras
    hvd.init()
    if spec.random_seed is not None:
        keras.utils.set_random_seed(spec.random_seed + hvd.rank())
    columns = list(spec.feature_cols) + list(spec.label_cols) + (
        [spec.sample_weight_col] if spec.sample_weight_col else [])
    fs = spec.store.fs
    train_arrays = reader.load_arrays(spec.train_files, hvd.rank(), hvd.size(), columns, fs)
    steps = spec.train_steps_per_epoch or max(
        1, spec.train_rows // (spec.batch_size * hvd.size()))
    train_ds = reader.dataset(train_arrays, spec.feature_cols, spec.label_cols,
                              spec.batch_size, spec.shuffle, spec.random_seed,
                              spec.sample_weight_col,
                              shuffle_buffer_size=spec.shuffle_buffer_size)
    val_ds, val_steps = None, None
    if spec.val_files:
        val_arrays = reader.load_arrays(spec.val_files, hvd.rank(), hvd.size(), columns, fs)
        val_batch = spec.val_batch_size or spec.batch_size
        val_steps = spec.validation_steps_per_epoch or max(
            1, -(-spec.val_rows // (val_batch * hvd.size())))
        val_ds = reader.dataset(val_arrays, spec.feature_cols, spec.label_cols, val_batch,
                                False, None, spec.sample_weight_col)
    model = model_from_bytes(spec.model, spec.custom_objects, compile=False)
    optimizer = keras.optimizers.deserialize(spec.optimizer,
                                             custom_objects=spec.custom_objects)
    optimizer = hvd.DistributedOptimizer(
        optimizer, compression=spec.gradient_compression or Compression.none,
        backward_passes_per_step=spec.backward_passes_per_step)
    model.compile(optimizer=optimizer, loss=spec.loss, loss_weights=spec.loss_weights,
                  metrics=spec.metrics)
    callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                 hvd.callbacks.MetricAverageCallback()] + list(spec.callbacks or [])
    if hvd.rank() == 0:
        callbacks.append(_checkpoint_callback(spec.store, spec.run_id))
        if spec.checkpoint_callback is not None:
            callbacks.append(spec.checkpoint_callback)
    history = model.fit(train_ds, steps_per_epoch=steps, epochs=spec.epochs,
                        validation_data=val_ds, validation_steps=val_steps,
                        callbacks=callbacks, verbose=spec.verbose if hvd.rank() == 0 else 0)
    if hvd.rank() != 0:
        return None
    spec.store.write_bytes(spec.store.get_checkpoint_path(spec.run_id), model_to_bytes(model))
    return {"history": {k: [float(v) for v in vs] for k, vs in history.history.items()},
            "steps_per_epoch": steps, "rows": _rows(train_arrays, spec.feature_cols)}

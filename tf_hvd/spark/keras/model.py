"""KerasModel: the Transformer KerasEstimator.fit returns (Horovod's
``horovod.spark.keras.KerasModel``).

``transform(df)`` adds one prediction column per label column (``<label>__output`` unless
``output_cols`` says otherwise): the model runs in the Spark tasks (``mapInPandas``; each
Python worker loads it once), never on the driver. A model with one value per row gives
a double column, otherwise an array of doubles. ``getModel()`` is the Keras model,
``getHistory()`` fit's history (rank 0's, metrics averaged over the ranks).

Spark ML persistence: ``keras_model.write().overwrite().save(path)`` (or ``save(path)``)
writes Spark's metadata and ``model.keras`` under ``path`` (a local path or fsspec URL);
``KerasModel.load(path)`` reads them back.
"""

import base64
import hashlib
import json
import posixpath

import cloudpickle
import numpy as np
from pyspark.ml import Model
from pyspark.ml.util import (DefaultParamsReader, DefaultParamsWriter, MLReadable, MLReader,
                             MLWritable, MLWriter)

from tf_hvd.spark.keras import columns, params
from tf_hvd.spark.keras.trainer import model_from_bytes

_PARAMS = {
    "feature_cols": ("the feature columns, one per model input", None),
    "label_cols": ("the label columns the model was trained on", None),
    "output_cols": ("the prediction columns (default <label>__output)", None),
    "custom_objects": ("custom objects for loading the model", None),
    "history": ("fit's history: {metric: [value per epoch]}", None),
    "run_id": ("the run's name in the store", None),
    "batch_size": ("rows per predict batch", 32),
}
_JSON_PARAMS = ("feature_cols", "label_cols", "output_cols", "history", "run_id",
                "batch_size")
_loaded = {}  # per Python worker: model digest -> Keras model


def _predictor(model_bytes, custom_objects):
    digest = hashlib.sha1(model_bytes).hexdigest()
    if digest not in _loaded:
        _loaded.clear()
        _loaded[digest] = model_from_bytes(model_bytes, custom_objects, compile=False)
    return _loaded[digest]


def _predict_batches(model_bytes, custom_objects, feature_cols, outputs, single, batch):
    """The pandas UDF's function: batches of feature structs -> batches of predictions,
    the model loaded once per Python worker."""
    import pandas as pd
    from typing import Iterator

    def predict(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        keras_model = _predictor(model_bytes, custom_objects)
        for pdf in frames:
            result = pd.DataFrame(index=pdf.index)
            if len(pdf) == 0:
                for name in outputs:
                    result[name] = pd.Series([], dtype=object)
                yield result
                continue
            y = keras_model.predict(_features(pdf, feature_cols), batch_size=batch, verbose=0)
            y = y if isinstance(y, (list, tuple)) else [y]
            for name, values, one in zip(outputs, y, single):
                values = np.asarray(values, np.float64).reshape(len(pdf), -1)
                result[name] = values[:, 0] if one else list(values)
            yield result
    return predict


def _features(pdf, cols):
    parts = [np.stack(pdf[c].to_numpy()).astype(np.float32) if pdf[c].dtype == object
             else pdf[c].to_numpy(np.float32) for c in cols]
    return parts[0] if len(parts) == 1 else parts


class KerasModel(Model, MLReadable, MLWritable):
    """A fitted Keras model as a Spark ML Transformer (see the module docstring)."""

    def __init__(self, model_bytes=None, **kwargs):
        super().__init__()
        params.defaults(self)
        self._model_bytes = model_bytes
        self._model = None
        self._set(**kwargs)

    def getModel(self):
        """The Keras model (loaded on first use)."""
        if self._model is None:
            self._model = model_from_bytes(self._model_bytes, self.getCustomObjects(),
                                           compile=False)
        return self._model

    def _outputs(self):
        return list(self.getOutputCols() or [c + "__output" for c in self.getLabelCols()])

    def _transform(self, df):
        from pyspark.ml.functions import vector_to_array
        from pyspark.sql import functions as F
        from pyspark.sql.types import ArrayType, DoubleType, StructField, StructType
        model = self.getModel()
        outputs = self._outputs()
        shapes = [o.shape for o in model.outputs]
        if len(shapes) != len(outputs):
            raise ValueError("the model has %d output(s) but %d prediction column(s) are "
                             "named: %s" % (len(shapes), len(outputs), outputs))
        single = [int(np.prod([d for d in s[1:] if d is not None] or [1])) == 1
                  for s in shapes]
        feature_cols = list(self.getFeatureCols())
        columns.check(df, {"feature": feature_cols})
        # The features go to the model as one struct column (ML vectors as arrays); the
        # predictions come back as one struct, spread into the output columns.
        inputs = F.struct(*[vector_to_array(df[c]).alias(c)
                            if columns.is_vector(df.schema[c].dataType) else df[c]
                            for c in feature_cols])
        result_type = StructType([
            StructField(name, DoubleType() if one else ArrayType(DoubleType()))
            for name, one in zip(outputs, single)])
        predict = F.pandas_udf(_predict_batches(self._model_bytes, self.getCustomObjects(),
                                                feature_cols, outputs, single,
                                                self.getBatchSize()), result_type)
        hidden = "__tf_hvd_predictions"
        return df.withColumn(hidden, predict(inputs)).select(
            "*", *[F.col(hidden)[name].alias(name) for name in outputs]).drop(hidden)

    # -- Spark ML persistence ----------------------------------------------------------------
    def write(self):
        return _KerasModelWriter(self)

    @classmethod
    def read(cls):
        return _KerasModelReader(cls)


params.declare(KerasModel, _PARAMS)


def _model_path(path):
    return posixpath.join(str(path).rstrip("/"), "model.keras")


def _fs(path):
    import fsspec
    return fsspec.core.url_to_fs(str(path))[0]


class _KerasModelWriter(MLWriter):
    """Spark's metadata (JSON params; custom objects pickled) and ``model.keras``."""

    def __init__(self, instance):
        super().__init__()
        self.instance = instance

    def saveImpl(self, path):
        values = params.values(self.instance)
        extra = {"custom_objects": base64.b64encode(
            cloudpickle.dumps(values["custom_objects"])).decode()}
        DefaultParamsWriter.saveMetadata(
            self.instance, path, self.sc, extraMetadata=extra,
            paramMap={k: values[k] for k in _JSON_PARAMS})
        fs = _fs(path)
        with fs.open(_model_path(path), "wb") as f:
            f.write(self.instance._model_bytes)


class _KerasModelReader(MLReader):
    def __init__(self, cls):
        super().__init__()
        self.cls = cls

    def load(self, path):
        metadata = DefaultParamsReader.loadMetadata(path, self.sc)
        with _fs(path).open(_model_path(path), "rb") as f:
            model_bytes = f.read()
        custom = cloudpickle.loads(base64.b64decode(metadata["custom_objects"]))
        model = self.cls(model_bytes=model_bytes, custom_objects=custom,
                         **{k: v for k, v in metadata["paramMap"].items()
                            if k in _JSON_PARAMS})
        model._resetUid(metadata["uid"])
        return model

"""tf_hvd on Apache Spark: Horovod's ``horovod.spark`` API for Keras 3.

* :func:`run` (``horovod.spark.run``): a function once per rank in the tasks of a
  barrier stage, the results in rank order;
* :mod:`tf_hvd.spark.keras`: ``KerasEstimator`` / ``KerasModel``, a Spark ML Estimator
  and Transformer (``horovod.spark.keras``).

pyspark is imported when a function needs it, not here: ``import tf_hvd.spark`` works
without it (tools/requirements-spark.txt installs it; Spark 4 needs Java 17). See
docs/spark.md.

    import tf_hvd.spark
    results = tf_hvd.spark.run(train, num_proc=2)
"""

from tf_hvd.spark.runner import run, run_elastic

__all__ = ["run", "run_elastic"]

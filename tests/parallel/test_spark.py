"""tf_hvd.spark on Spark's local-cluster mode (``local-cluster[2,1,1024]``: a master and
two executors of one core each, real JVM processes, started the way Spark's own tests
start them), one session for the module.

* tf_hvd.spark.run: num_proc defaults to the cluster's 2 task slots; the ranks' lines
  reach the driver's streams; a rank that raises gives the same exception type on the
  driver, a killed or frozen rank HorovodInternalError, each naming the rank first with
  its host and pid as tfhvdrun does, and leaves no rank process behind (results
  in rank order with real collectives: the estimator's fit here, and
  test_spark_cluster.py on two hosts).
* Bad input, each a clear error on the driver before anything runs: num_proc above the
  slots, a function that does not pickle, MPI; the estimator's missing and non-numeric
  columns and a store that cannot be written.
* KerasEstimator on the digits DataFrame at num_proc=2 (python/examples/spark): the test
  accuracy of KerasModel.transform's predictions within 0.02 of keras_digits.py's at
  np=2; the model saved and loaded with Spark ML persistence predicts the same.
"""

import io
import os
import re
import secrets
import socket
import sys
import tempfile
import threading
import time

import numpy as np
import pytest

from tf_hvd.exceptions import HorovodInternalError
from spark_support import EXAMPLES, rank_processes, session_conf, spark_unavailable

pytestmark = pytest.mark.timeout(600)
# keras_digits.py at np=2 with its defaults (tfhvdrun -np 2, 15 epochs): 0.9694; the
# estimator runs the same model, data, batch size and learning-rate schedule.
EXAMPLE_ACCURACY = 0.9694


@pytest.fixture(scope="module")
def spark():
    reason = spark_unavailable()
    if reason:
        pytest.skip(reason)
    from pyspark.sql import SparkSession
    builder = SparkSession.builder.master("local-cluster[2,1,1024]").appName("test_spark")
    # the ranks' functions are this module's: the executors import it
    for key, value in session_conf([os.path.dirname(os.path.abspath(__file__))]).items():
        builder = builder.config(key, value)
    # the secret of the TF_CONFIG job (MirroredStrategyRunner's tasks), as a user gives it
    builder = builder.config("spark.executorEnv.HOROVOD_GLOO_RENDEZVOUS_SECRET",
                             secrets.token_hex(32))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    from tf_hvd.spark import slots
    deadline = time.monotonic() + 180
    while slots.task_slots(session.sparkContext) < 2:  # the executors register
        assert time.monotonic() < deadline, "local-cluster's executors did not register"
        time.sleep(0.2)
    yield session
    session.stop()


def _rank_one_raises():
    import os
    import time
    print("rank %s of %s on %s" % (os.environ["HOROVOD_RANK"], os.environ["HOROVOD_SIZE"],
                                   os.environ["HOROVOD_LOCAL_SIZE"]), flush=True)
    print("pid %d" % os.getpid(), flush=True)
    if os.environ["HOROVOD_RANK"] == "1":
        raise KeyError("shard 7 is missing")
    time.sleep(600)  # rank 0 waits: Spark must stop it when rank 1 fails


def test_a_failing_rank_raises_its_error_on_the_driver_and_nothing_stays(spark):
    """num_proc left to the cluster (its 2 slots); rank 1 raises, rank 0 waits. Rank order,
    results and collectives of a run that succeeds: the estimator below, and the
    standalone cluster's test (test_spark_cluster.py)."""
    import tf_hvd.spark
    out = io.StringIO()
    t0 = time.monotonic()
    with pytest.raises(KeyError) as raised:
        tf_hvd.spark.run(_rank_one_raises, stdout=out)
    took = time.monotonic() - t0
    # the rank's lines reach the driver's stream; both executors share this host
    assert "[1]<stdout>:rank 1 of 2 on 2" in out.getvalue().splitlines(), out.getvalue()
    message = raised.value.args[0]
    assert message.splitlines() == [
        "rank 1 (on %s, pid %s) raised KeyError: 'shard 7 is missing'; rank 0 stopped in "
        "consequence" % (socket.gethostname(), _pid_of(1, out.getvalue())),
        "(rank 1 ran in Spark executor %s)" % message.rsplit(" ", 1)[1][:-1]], message
    print("KeyError", message.splitlines()[0])  # the closing note quotes it (pytest -s)
    assert "_rank_one_raises" in str(raised.value.__cause__)  # the rank's traceback
    assert took < 120, took
    deadline = time.monotonic() + 30
    while rank_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert rank_processes() == []  # rank 0's process went with its task


def _pid_of(rank, output):
    return re.search(r"^\[%d\]<stdout>:pid (\d+)$" % rank, output, re.M).group(1)


@pytest.mark.parametrize("how", ["kill", "freeze"])
def test_a_killed_or_frozen_rank_is_named_first_with_host_and_pid(spark, how):
    """As tfhvdrun names them (rank_faults.py): from the cores' fault records, whichever
    task Spark saw fail first; the frozen rank's process goes with its task."""
    import tf_hvd.spark
    from rank_faults import FIRST_LINES, fail_rank_one
    out = io.StringIO()
    with pytest.raises(HorovodInternalError) as raised:
        tf_hvd.spark.run(fail_rank_one, args=(how,), stdout=out,
                         env={"HOROVOD_PEER_TIMEOUT_SECONDS": "4"})
    first = raised.value.args[0].splitlines()[0]
    host = socket.gethostname() if how == "kill" else r"\S+"  # the core's name of the host
    assert re.match(r"^rank 1 \(on %s, pid %s\) %s; rank 0 stopped in consequence$"
                    % (host, _pid_of(1, out.getvalue()), FIRST_LINES[how]), first), first
    print(type(raised.value).__name__, first)  # the closing note quotes it (pytest -s)
    deadline = time.monotonic() + 30
    while rank_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert rank_processes() == []


def test_bad_input_is_refused_on_the_driver_before_anything_runs(spark, tmp_path):
    import tf_hvd.spark
    from tf_hvd.spark.keras import KerasEstimator, Store
    sys.path.insert(0, EXAMPLES)
    import keras_digits_spark as example
    dag = spark.sparkContext._jsc.sc().dagScheduler()
    jobs_before = dag.numTotalJobs()  # none of what follows may start a Spark job
    t0 = time.monotonic()
    with pytest.raises(ValueError, match=r"num_proc=3 but the Spark cluster \(master "
                       r"local-cluster\[2,1,1024\]\) has 2 task slot\(s\)"):
        tf_hvd.spark.run(_rank_one_raises, num_proc=3)
    assert time.monotonic() - t0 < 30
    lock = threading.Lock()
    with pytest.raises(TypeError, match=r"cannot be pickled .*cannot pickle '_thread.lock'"):
        tf_hvd.spark.run(lambda: lock, num_proc=2)
    with pytest.raises(ValueError, match="MPI inside Spark tasks is not supported"):
        tf_hvd.spark.run(_rank_one_raises, use_mpi=True)

    train, _ = example.digits_frames(spark)
    store = Store.create(str(tmp_path / "store"))

    def fit(df, **changes):
        est = example.estimator(store, epochs=1, verbose=0)
        est.setParams(**changes)
        return est.fit(df)
    with pytest.raises(ValueError, match=r"no column for feature 'pixels', label 'digit'; "
                       r"its columns are \['features', 'label'\]"):
        fit(train, feature_cols=["pixels"], label_cols=["digit"])
    from pyspark.sql import functions as F
    named = train.withColumn("name", F.concat(F.lit("digit "), F.col("label").cast("string")))
    with pytest.raises(TypeError, match=r"label 'name' is string: features, labels and "
                       r"sample weights must be numbers"):
        fit(named, label_cols=["name"])
    (tmp_path / "a_file").write_text("not a directory")
    with pytest.raises(ValueError, match=r"the store's path .*a_file/store cannot be written"):
        fit(train, store=Store.create(str(tmp_path / "a_file" / "store")))
    with pytest.raises(ValueError, match="reader_pool_type is not supported"):
        KerasEstimator(reader_pool_type="process")
    # nothing ran: no Spark job, nothing written, no rank
    assert dag.numTotalJobs() == jobs_before
    assert not (tmp_path / "store").exists()
    assert rank_processes() == []


def test_estimator_fit_on_digits_matches_the_plain_example(spark, tmp_path):
    sys.path.insert(0, EXAMPLES)
    import keras_digits_spark as example
    from tf_hvd.spark.keras import KerasModel, Store
    train, test = example.digits_frames(spark)
    store = Store.create(str(tmp_path / "store"))
    t0 = time.monotonic()
    model = example.estimator(store, num_proc=2, epochs=15, verbose=0).fit(train)
    fit_s = time.monotonic() - t0
    history = model.getHistory()
    assert len(history["accuracy"]) == 15
    run_id = model.getRunId()
    ckpt = store.get_checkpoint_path(run_id)   # committed whole, its sidecar written last
    assert sorted(os.listdir(os.path.dirname(ckpt))) == ["checkpoint.keras",
                                                         "checkpoint.keras.manifest.json"]
    with open(ckpt, "rb") as f:
        assert store.read_bytes(ckpt, require_manifest=True) == f.read()
    assert len(store.parquet_files(store.get_train_data_path(run_id))) == 2 * 4
    predictions = model.transform(test)
    assert predictions.columns == ["features", "label", "label__output"]
    accuracy = example.accuracy(predictions)
    sys.stderr.write("estimator: fit %.1f s, test accuracy %.4f (example %.4f)\n"
                     % (fit_s, accuracy, EXAMPLE_ACCURACY))
    assert accuracy >= EXAMPLE_ACCURACY - 0.02, accuracy
    path = os.path.join(tempfile.mkdtemp(dir=str(tmp_path)), "digits_model")
    model.write().overwrite().save(path)
    loaded = KerasModel.load(path)
    assert (loaded.getRunId(), loaded.getFeatureCols(), loaded.getHistory()) == (
        run_id, ["features"], history)
    assert loaded.uid == model.uid
    first = {tuple(r["features"]): r["label__output"] for r in predictions.collect()}
    again = {tuple(r["features"]): r["label__output"]
             for r in loaded.transform(test).collect()}
    assert again == first
    assert np.isclose(sum(first[next(iter(first))]), 1.0)  # softmax rows


def _tf_config_script():
    """A tf_hvd script as MirroredStrategyRunner(use_custom_strategy=True) runs it: in the
    task's own Python, with the TF_CONFIG the runner set."""
    import json
    import os
    import tensorflow as tf
    import tf_hvd as hvd
    hvd.init()
    total = hvd.allreduce(tf.constant([float(hvd.rank() + 1)]), op=hvd.Sum)
    seen = hvd.allgather_object((hvd.rank(), json.loads(os.environ["TF_CONFIG"])["task"]))
    size = hvd.size()
    hvd.shutdown()
    return {"size": size, "total": total.numpy().tolist(), "seen": seen}


def test_spark_tensorflow_distributor_runs_a_tf_hvd_script(spark):
    """spark-tensorflow-distributor's MirroredStrategyRunner (PyPI, 1.0.0) with
    use_custom_strategy=True sets TF_CONFIG in its barrier tasks; hvd.init() there forms
    one job (rank = the task's index). The runner returns partition 0's result. It runs
    the function in Spark's reused Python worker, so this test comes last in the module."""
    distributor = pytest.importorskip("spark_tensorflow_distributor")
    runner = distributor.MirroredStrategyRunner(num_slots=2, use_gpu=False,
                                                use_custom_strategy=True)
    result = runner.run(_tf_config_script)
    assert (result["size"], result["total"]) == (2, [3.0])
    assert [tuple(s) for s in result["seen"]] == [(0, {"type": "worker", "index": 0}),
                                                   (1, {"type": "worker", "index": 1})]

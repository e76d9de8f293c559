"""The Spark driver of tests/parallel/test_spark_cluster.py, run on namespace host h1
against the standalone master: one SparkSession for every check (the JVM starts once).

1. tf_hvd.spark.run of a Keras fit (ray_workers/ray_train_fns.keras_fit_rank) with
   num_proc left to the cluster's slots, and the one-process reference of it;
2. a job whose rank on h2 reports its executor JVM, which this driver then SIGKILLs:
   the time until run() raises and what it raised.

Writes everything to --out (JSON).
"""

import argparse
import json
import os
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "ray_workers"))

from spark_support import session_conf  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--master", required=True)
    parser.add_argument("--driver-host", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--marker", required=True)
    args = parser.parse_args()
    result = {}
    t0 = time.monotonic()
    from pyspark.sql import SparkSession
    builder = SparkSession.builder.master(args.master).appName("tf_hvd cluster test")
    conf = session_conf([HERE, os.path.join(os.path.dirname(HERE), "ray_workers")])
    conf["spark.driver.host"] = args.driver_host
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    import tf_hvd.spark
    from tf_hvd.spark import slots
    deadline = time.monotonic() + 240
    while slots.task_slots(spark.sparkContext) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)  # both workers' executors register
    result["session_s"] = time.monotonic() - t0
    try:
        import cluster_fns
        import ray_train_fns as fns
        t1 = time.monotonic()
        result["slots"] = slots.task_slots(spark.sparkContext)
        result["ranks"] = tf_hvd.spark.run(fns.keras_fit_rank, args=(3, 4, 2, 0.05))
        result["fit_s"] = time.monotonic() - t1
        result["reference"] = fns.keras_fit_reference(2, 3, 4, 2, 0.05)

        killed = {}

        def killer():
            deadline = time.monotonic() + 240
            while not os.path.exists(args.marker) and time.monotonic() < deadline:
                time.sleep(0.1)
            with open(args.marker) as f:
                killed.update(json.load(f))
            killed["at"] = time.monotonic()
            os.kill(killed["jvm"], signal.SIGKILL)
        thread = threading.Thread(target=killer, daemon=True)
        thread.start()
        try:
            tf_hvd.spark.run(cluster_fns.allreduce_until_killed, args=(args.marker, "h2"),
                             num_proc=2, verbose=0)
            result["kill_error"] = None
        except Exception as e:  # noqa: BLE001 - what the test checks
            result["kill_error"] = "%s: %s" % (type(e).__name__, e)
        result["raised_after_kill_s"] = time.monotonic() - killed.get("at", time.monotonic())
        result["killed"] = killed
    finally:
        with open(args.out, "w") as f:
            json.dump(result, f)
        spark.stop()


if __name__ == "__main__":
    main()

"""tf_hvd.spark on a Spark standalone cluster of two hosts: a master on namespace host h1
and a worker (one core) on each of h1 and h2 (tools/clusters/netns_cluster.py), real JVMs started
with Spark's own ``spark-class`` as an operator starts them; the driver runs on h1
(spark_workers/cluster_driver.py, one SparkSession for every check).

* tf_hvd.spark.run of a Keras fit with num_proc left to the cluster: ranks in order, one
  on each host (local size 1, cross size 2), every rank's final weights equal to one
  process's fit of the same batches.
* The executor JVM of the rank on h2 SIGKILLed while the ranks allreduce: run() raises on
  the driver within 60 s, HorovodInternalError naming that rank and its executor as lost;
  no rank process is left on either host.
"""

import json
import os
import re
import sys
import time

import numpy as np
import pytest

from jobrunner import PYTHON, REPO, Job, job_env, run
from namespace_hosts import leftovers, namespace_cluster
from spark_support import spark_unavailable

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER = os.path.join(HERE, "spark_workers", "cluster_driver.py")
PORT = 7077
pytestmark = pytest.mark.timeout(600)


class Standalone(object):
    """A standalone master on h1 and a one-core worker on each host."""

    def __init__(self, cluster, tmp):
        import pyspark
        self.cluster, self.tmp = cluster, tmp
        self.spark_class = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-class")
        self.jobs = {}
        self.master = "spark://%s:%d" % (cluster.address("h1"), PORT)

    def env(self, host):
        return job_env({"SPARK_LOCAL_IP": self.cluster.address(host),
                        "SPARK_LOG_DIR": os.path.join(self.tmp, "logs-" + host),
                        "PYSPARK_PYTHON": PYTHON, "TF_CPP_MIN_LOG_LEVEL": "1"})

    def start(self, name, host, argv, ready, within=180):
        lines = []
        job = Job(self.cluster.exec_argv(host, [self.spark_class] + argv), env=self.env(host),
                  cwd=self.tmp, log_path=os.path.join(self.tmp, name + ".log"),
                  on_line=lambda _, line: lines.append(line))
        self.jobs[name] = job
        deadline = time.monotonic() + within
        while not any(ready in l for l in lines):
            if not job.running() or time.monotonic() > deadline:
                job.kill()
                raise RuntimeError("%s on %s did not start:\n%s" % (name, host,
                                                                   "\n".join(lines[-30:])))
            time.sleep(0.2)

    def up(self):
        h1 = self.cluster.address("h1")
        self.start("master", "h1", ["org.apache.spark.deploy.master.Master", "--host", h1,
                                    "--port", str(PORT), "--webui-port", "0"],
                   "I have been elected leader")
        for host in ("h1", "h2"):
            self.start("worker-" + host, host, [
                "org.apache.spark.deploy.worker.Worker", "--host", self.cluster.address(host),
                "--cores", "1", "--memory", "1g", "--webui-port", "0", "--work-dir",
                os.path.join(self.tmp, "work-" + host), self.master],
                "Successfully registered with master")

    def down(self):
        for name in ("worker-h2", "worker-h1", "master"):
            job = self.jobs.pop(name, None)
            if job is not None:
                job.kill()


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory):
    reason = spark_unavailable()
    if reason:
        pytest.skip(reason)
    with namespace_cluster(2, __name__) as cluster:
        standalone = Standalone(cluster, str(tmp_path_factory.mktemp("spark")))
        t0 = time.monotonic()
        try:
            standalone.up()
            sys.stderr.write("spark standalone cluster up in %.1f s\n" % (time.monotonic() - t0))
            yield standalone
        finally:
            standalone.down()


def _max_diff(weights, reference):
    return max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
               for a, b in zip(weights, reference))


def test_run_on_two_hosts_and_a_killed_executor(spark_cluster, tmp_path):
    cluster = spark_cluster.cluster
    out, marker = str(tmp_path / "driver.json"), str(tmp_path / "victim.json")
    res = run(cluster.exec_argv("h1", [
        PYTHON, DRIVER, "--master", spark_cluster.master, "--driver-host",
        cluster.address("h1"), "--out", out, "--marker", marker]), 420,
        env=job_env({"PYSPARK_PYTHON": PYTHON, "SPARK_LOCAL_IP": cluster.address("h1")}),
        cwd=REPO)
    assert os.path.exists(out), res.describe()
    result = json.load(open(out))
    print(json.dumps({k: v for k, v in result.items() if k not in ("ranks", "reference")}))
    print(json.dumps([{k: r[k] for k in ("rank", "size", "local_rank", "local_size",
                                         "cross_rank", "cross_size", "host", "loss")}
                      for r in result.get("ranks", [])]))
    assert res.ok, res.describe()
    # num_proc: the cluster's 2 slots; ranks in order, one per host
    ranks = result["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert sorted(r["host"] for r in ranks) == ["h1", "h2"]
    assert all((r["size"], r["local_rank"], r["local_size"], r["cross_size"]) == (2, 0, 1, 2)
               for r in ranks)
    assert [r["cross_rank"] for r in ranks] == [0, 1]
    for r in ranks:
        assert r["weights"] == ranks[0]["weights"]  # bit-identical across ranks
        assert _max_diff(r["weights"], result["reference"]) < 1e-5
    # the killed executor: the rank on h2 (in that run's placement) named, within 60 s
    victim = result["killed"]
    assert victim["rank"] in (0, 1) and victim["jvm"], victim
    assert result["raised_after_kill_s"] < 60, result
    error = result["kill_error"] or ""
    # named as every launcher names a failure: the root cause first, with host and pid
    assert re.match(r"HorovodInternalError: rank %d \(on h2, pid \d+\) (was lost with its "
                    r"Spark executor \S+ before its function returned: |left the job)"
                    % victim["rank"], error), error
    assert "ExecutorLost" in error or "left the job" in error, error
    left = [l for l in leftovers(cluster) if "tf_hvd.spark.rank_main" in l]
    assert left == []


def test_nothing_left_after_the_cluster_stops(spark_cluster):
    spark_cluster.down()
    deadline = time.monotonic() + 20
    while leftovers(spark_cluster.cluster) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert leftovers(spark_cluster.cluster) == []

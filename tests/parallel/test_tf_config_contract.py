"""The launch contracts of Kubeflow's TFJob and Vertex AI custom training, played on the
namespace cluster: Kubernetes and Vertex cannot run here, so h1, h2, h3 are the pods (or
the replicas' VMs) and each process gets exactly the environment its platform gives it:

* TFJob (kubeflow.org/v1, python/examples/k8s/tfjob-*.yaml): TF_CONFIG with the job's
  chief, worker and ps tasks at <host>:<port> (each replica's Service) and the
  process's own task; the secret from a Kubernetes Secret in
  HOROVOD_GLOO_RENDEZVOUS_SECRET. The ps process must not become a rank.
* Vertex AI (python/examples/k8s/vertex-customjob.yaml): CLUSTER_SPEC with workerpool0 (the primary
  replica) and workerpool1 and TF_CONFIG with the same cluster as chief and worker.

No tfhvdrun anywhere: each process runs the training script itself, and hvd.init() joins
the job from TF_CONFIG (tf_hvd.scheduler.tf_config). Skipped, with the reason, where the
namespace cluster cannot run (not root, no ip/sshd).
"""

import json
import os
import re
import secrets

import pytest

from jobrunner import PYTHON, REPO, Job, base_env
from namespace_hosts import namespace_cluster

HERE = os.path.dirname(os.path.abspath(__file__))

WORKER = os.path.join(HERE, "workers", "engine_checks.py")
TRAIN_EAGER = os.path.join(HERE, "training_workers", "train_eager.py")
TIMEOUT = 240
# TFJob's and Vertex's port is 2222, where the namespace hosts' sshd also listens
# (netns_cluster.SSH_PORTS): the play uses the next one.
PORT = 2223
ERROR_TYPE = "tf_hvd.scheduler.job.SchedulerEnvError"


@pytest.fixture(scope="module")
def pods():
    with namespace_cluster(3, __name__) as c:
        yield c


def _start(pods, processes, argv, secret, **extra):
    """One process per (host, environment); their JobResults in that order."""
    jobs = []
    try:
        for host, env in processes:
            env = base_env(dict(env, HOROVOD_GLOO_RENDEZVOUS_SECRET=secret,
                                HOROVOD_START_TIMEOUT=str(extra.get("start_timeout", 60))))
            jobs.append(Job(pods.exec_argv(host, [PYTHON] + argv), env=env, cwd=REPO))
        return [job.wait(TIMEOUT) for job in jobs]
    finally:
        for job in jobs:
            job.kill()


def _tfjob_env(cluster, kind, index):
    return {"TF_CONFIG": json.dumps({"cluster": cluster,
                                     "task": {"type": kind, "index": index}})}


TFJOB = {"chief": ["h1:%d" % PORT], "worker": ["h2:%d" % PORT, "h3:%d" % PORT],
         "ps": ["h1:%d" % (PORT + 1)]}
TFJOB_TASKS = [("h1", "chief", 0), ("h2", "worker", 0), ("h3", "worker", 1)]


def _result(res):
    assert res.ok, res.describe()
    (line,) = [l for l in res.output.splitlines() if l.startswith("ENGINE_RESULT ")]
    return json.loads(line[len("ENGINE_RESULT "):])


def _error(res):
    assert res.returncode == 3 and not res.timed_out, res.describe()
    (line,) = [l for l in res.output.splitlines() if l.startswith("ENGINE_ERROR ")]
    return line[len("ENGINE_ERROR "):]


def _check_exact(results, hosts):
    size = len(hosts)
    for rank, (got, host) in enumerate(zip(results, hosts)):
        assert (got["rank"], got["size"], got["host"]) == (rank, size, host), got
        assert (got["local_rank"], got["local_size"]) == (0, 1), got
        assert (got["cross_rank"], got["cross_size"]) == (rank, size), got
        assert got["gloo"] and got["sum_exact"], json.dumps(got)
        assert got["gathered"] == list(range(size)), got
        assert got["broadcast"] == [7.5] and not got["secret_on_cmdline"], got


def test_tfjob_chief_and_two_workers_exact_and_the_ps_is_not_a_rank(pods):
    processes = [(h, _tfjob_env(TFJOB, k, i)) for h, k, i in TFJOB_TASKS]
    processes.append(("h1", _tfjob_env(TFJOB, "ps", 0)))
    *ranks, ps = _start(pods, processes, [WORKER], secrets.token_hex(32))
    _check_exact([_result(r) for r in ranks], ["h1", "h2", "h3"])
    assert _error(ps) == (
        ERROR_TYPE + ": TF_CONFIG: this process is task ps[0], and ps tasks are not ranks of "
        "a tf_hvd job; tf_hvd averages gradients with collectives and needs no parameter "
        "servers: leave the ps replicas out of the job")


def test_tfjob_keras_fit_equals_one_process(pods, tmp_path):
    cluster = dict(TFJOB)
    del cluster["ps"]
    processes = [(h, dict(_tfjob_env(cluster, k, i), TRAINING_ONLY="keras_equivalence"))
                 for h, k, i in TFJOB_TASKS]
    results = _start(pods, processes, [TRAIN_EAGER, str(tmp_path)], secrets.token_hex(32))
    for rank, res in enumerate(results):
        assert res.ok, res.describe()
        assert re.search(r"\[rank %d\] TRAINING OK" % rank, res.output), res.describe()


def test_vertex_workerpools_with_cluster_spec_and_tf_config_exact(pods):
    pools = {"workerpool0": ["h1:%d" % PORT], "workerpool1": ["h2:%d" % PORT, "h3:%d" % PORT]}
    roles = {"chief": pools["workerpool0"], "worker": pools["workerpool1"]}
    processes = []
    for host, pool, role, index in [("h1", "workerpool0", "chief", 0),
                                    ("h2", "workerpool1", "worker", 0),
                                    ("h3", "workerpool1", "worker", 1)]:
        processes.append((host, {
            "CLUSTER_SPEC": json.dumps({"cluster": pools, "environment": "cloud",
                                        "task": {"type": pool, "index": index, "trial": ""},
                                        "job": {}}),
            "TF_CONFIG": json.dumps({"cluster": roles, "environment": "cloud",
                                     "task": {"type": role, "index": index, "trial": ""}}),
            "CLOUD_ML_JOB_ID": "4242"}))
    results = _start(pods, processes, [WORKER], secrets.token_hex(32))
    _check_exact([_result(r) for r in results], ["h1", "h2", "h3"])


def test_a_worker_that_never_comes_and_a_chief_that_never_comes(pods):
    """worker 1 is never started: the chief names the rank that did not check in, and
    the worker that did fails with the chief's message; a worker of another job whose
    chief never starts names the address it could not reach. All within the start
    time-out, none hangs."""
    cluster = {"chief": ["h1:%d" % PORT], "worker": ["h2:%d" % PORT, "h3:%d" % PORT]}
    lonely = {"chief": ["h3:%d" % (PORT + 5)], "worker": ["h2:%d" % (PORT + 5)]}
    processes = [("h1", _tfjob_env(cluster, "chief", 0)), ("h2", _tfjob_env(cluster, "worker", 0)),
                 ("h2", _tfjob_env(lonely, "worker", 0))]
    chief, worker0, orphan = _start(pods, processes, [WORKER], secrets.token_hex(32),
                                    start_timeout=6)
    expected = ("TF_CONFIG: rank(s) 2 did not check in at this rank 0's rendezvous h1:%d "
                "within the start time-out (HOROVOD_START_TIMEOUT); they did not start, or "
                "cannot reach this host" % PORT)
    assert _error(chief) == ERROR_TYPE + ": " + expected
    assert _error(worker0) == ERROR_TYPE + ": rank 0 says: " + expected
    assert _error(orphan) == (
        ERROR_TYPE + ": TF_CONFIG: rank 1 cannot reach rank 0's rendezvous at TF_CONFIG's "
        "cluster.chief[0] = h3:%d within the start time-out (Connection refused); is rank 0 "
        "running, and is TF_CONFIG's cluster.chief[0] the same on every rank?" % (PORT + 5))

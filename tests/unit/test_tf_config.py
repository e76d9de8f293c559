"""TF_CONFIG and Vertex AI's CLUSTER_SPEC mapped onto a job (tf_hvd.scheduler.tf_config):
the rank order, local and cross ranks from shared hosts, the rendezvous at rank 0's own
address, and an error naming the field for every description that cannot make a job."""

import json

import pytest

from tf_hvd.scheduler import engine_env as res, tf_config as tfc

CLUSTER = {"chief": ["c0:2222"], "worker": ["w0:2222", "w1:2222"], "ps": ["p0:2222"]}


def _tf(cluster, kind=None, index=0, **extra):
    spec = {"cluster": cluster}
    if kind is not None:
        spec["task"] = {"type": kind, "index": index}
    return dict({"TF_CONFIG": json.dumps(spec)}, **extra)


def _vertex(cluster, pool, index=0):
    return json.dumps({"cluster": cluster, "environment": "cloud",
                       "task": {"type": pool, "index": index, "trial": ""},
                       "job": {"worker_pool_specs": []}})


def _error(environ):
    with pytest.raises(res.SchedulerEnvError) as e:
        res.resolve(environ)
    return str(e.value)


@pytest.mark.parametrize("kind,index,rank", [("chief", 0, 0), ("worker", 0, 1),
                                             ("worker", 1, 2)])
def test_chief_first_then_workers(kind, index, rank):
    job = res.resolve(_tf(CLUSTER, kind, index))
    assert job == res.Job("TF_CONFIG", rank, 3, 0, 1, rank, 3, "c0", 2222,
                          ["c0", "w0", "w1"][rank], "TF_CONFIG's cluster.chief[0]")


def test_workers_only_worker_0_serves():
    job = res.resolve(_tf({"worker": ["a:1000", "b:1001"]}, "worker", 1))
    assert (job.rank, job.size, job.master_addr, job.master_port) == (1, 2, "a", 1000)
    assert job.meeting == "TF_CONFIG's cluster.worker[0]"


def test_master_is_the_chief():
    job = res.resolve(_tf({"master": ["m:5"], "worker": ["w:6"]}, "worker", 0))
    assert (job.rank, job.size, job.master_addr) == (1, 2, "m")


def test_tasks_sharing_a_host_are_local_ranks():
    """Ray Train gives every worker on one node the node's IP, each with its own port."""
    cluster = {"worker": ["10.0.0.1:7001", "10.0.0.1:7002", "10.0.0.2:7003",
                          "10.0.0.2:7004", "10.0.0.2:7005"]}
    got = [res.resolve(_tf(cluster, "worker", i)) for i in range(5)]
    assert [(j.local_rank, j.local_size) for j in got] == [(0, 2), (1, 2), (0, 3), (1, 3),
                                                          (2, 3)]
    # Horovod's cross rank: among the hosts running a rank with this local rank.
    assert [(j.cross_rank, j.cross_size) for j in got] == [(0, 2), (0, 2), (1, 2), (1, 2),
                                                          (0, 1)]
    assert {j.host for j in got} == {"10.0.0.1", "10.0.0.2"}


def test_sparse_cluster_form_and_ipv6():
    job = res.resolve(_tf({"worker": {"1": "[fd00::2]:9", "0": "[fd00::1]:8"}}, "worker", 1))
    assert (job.rank, job.master_addr, job.master_port, job.host) == (1, "fd00::1", 8, "fd00::2")


@pytest.mark.parametrize("environ", [
    {},
    {"TF_CONFIG": ""},
    {"TF_CONFIG": "{}"},
    {"TF_CONFIG": json.dumps({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker",
                                                                     "index": 0}})},
    {"TF_CONFIG": json.dumps({"cluster": {"chief": ["a:1"]}})},
])
def test_no_job_or_a_job_of_one(environ):
    assert res.resolve(environ) is None


def test_a_launcher_started_rank_ignores_tf_config():
    assert res.resolve(_tf(CLUSTER, "worker", 0, HOROVOD_RANK="1")) is None


def test_horovod_env_points_at_rank_0():
    env = res.horovod_env(res.resolve(_tf(CLUSTER, "worker", 1)), "10.1.1.1")
    assert env["HOROVOD_RANK"] == "2" and env["HOROVOD_SIZE"] == "3"
    assert env["HOROVOD_GLOO_RENDEZVOUS_ADDR"] == "c0"
    assert env["HOROVOD_GLOO_RENDEZVOUS_PORT"] == "2222"
    assert env["HOROVOD_SLOT_HOSTNAME"] == "w1"


@pytest.mark.parametrize("kind,why", [
    ("ps", "TF_CONFIG: this process is task ps[0], and ps tasks are not ranks of a tf_hvd "
           "job; tf_hvd averages gradients with collectives and needs no parameter servers: "
           "leave the ps replicas out of the job"),
    ("evaluator", "TF_CONFIG: this process is task evaluator[0], and evaluator tasks are not "
                  "ranks of a tf_hvd job; a side-car evaluator does not train: do not call "
                  "hvd.init() in it (tf_hvd.scheduler.tf_config_task() tells a process its "
                  "task)"),
])
def test_ps_and_evaluator_are_not_ranks(kind, why):
    cluster = dict(CLUSTER, evaluator=["e0:2222"])
    assert _error(_tf(cluster, kind, 0)) == why
    assert tfc.tf_config_task(_tf(cluster, kind, 0)) == (kind, 0)


@pytest.mark.parametrize("environ,message", [
    ({"TF_CONFIG": "{'cluster': 1}"}, "TF_CONFIG is not valid JSON (Expecting property name "
                                      "enclosed in double quotes: line 1 column 2 (char 1))"),
    ({"TF_CONFIG": "[1]"}, "TF_CONFIG must be a JSON object, not list"),
    (_tf(CLUSTER), "TF_CONFIG describes a cluster of 3 training tasks but not this process's "
                   "task (task.type and task.index); every process needs its own"),
    (_tf(CLUSTER, "worker", 2), "TF_CONFIG: task.index=2 is out of range: cluster.worker has "
                                "2 task(s)"),
    (_tf(CLUSTER, "worker", "x"), "TF_CONFIG: task.index='x' is not an integer"),
    (_tf({"worker": ["a:1", "b:1"]}, "chief"), "TF_CONFIG: task.type is 'chief' but the "
                                               "cluster has no chief (it has worker)"),
    (_tf(dict(CLUSTER, trainer=["t:1"]), "worker"),
     "TF_CONFIG: cluster has task type 'trainer', which tf_hvd cannot place (it trains on "
     "chief and worker tasks; ps and evaluator tasks are not ranks)"),
    (_tf({"worker": ["a:1", "b:2", "a:1"]}, "worker"),
     "TF_CONFIG: cluster.worker[0] and cluster.worker[2] have the same address a:1; every "
     "task needs its own host:port"),
    (_tf({"chief": ["a:1"], "worker": ["b:2"], "ps": ["a:1"]}, "worker"),
     "TF_CONFIG: cluster.chief[0] and cluster.ps[0] have the same address a:1; every task "
     "needs its own host:port"),
    (_tf({"chief": ["a:1", "b:1"], "worker": ["c:1"]}, "worker"),
     "TF_CONFIG: cluster.chief lists 2 tasks; a job has one chief"),
    (_tf({"chief": ["a:1"], "master": ["b:1"]}, "chief"),
     "TF_CONFIG: cluster has both a chief and a master; they are one role, give one of them"),
    (_tf({"worker": ["a:1", "b"]}, "worker"), "TF_CONFIG: cluster.worker[1]='b' is not a "
                                              "host:port address"),
    (_tf({"worker": ["a:1", "b:99999"]}, "worker"), "TF_CONFIG: cluster.worker[1]='b:99999' "
                                                    "is not a host:port address"),
    (_tf({"worker": "a:1,b:2"}, "worker"), "TF_CONFIG: cluster.worker must be a list of "
                                           "host:port addresses"),
    (_tf({"ps": ["a:1"]}, "ps"), "TF_CONFIG: the cluster has no chief or worker task to "
                                 "train"),
])
def test_malformed_tf_config_names_the_field(environ, message):
    assert _error(environ) == message


VERTEX = {"workerpool0": ["cmle-training-workerpool0-1a-0:2222"],
          "workerpool1": ["cmle-training-workerpool1-1a-0:2222",
                          "cmle-training-workerpool1-1a-1:2222"]}


@pytest.mark.parametrize("pool,index,rank", [("workerpool0", 0, 0), ("workerpool1", 0, 1),
                                             ("workerpool1", 1, 2)])
def test_vertex_cluster_spec(pool, index, rank):
    job = res.resolve({"CLUSTER_SPEC": _vertex(VERTEX, pool, index)})
    assert (job.engine, job.rank, job.size) == ("Vertex AI (CLUSTER_SPEC)", rank, 3)
    assert (job.master_addr, job.master_port) == ("cmle-training-workerpool0-1a-0", 2222)
    assert job.meeting == "CLUSTER_SPEC's cluster.workerpool0[0]"


def test_vertex_sets_both_and_they_agree():
    tf_config = json.dumps({"cluster": {"chief": VERTEX["workerpool0"],
                                        "worker": VERTEX["workerpool1"]},
                            "task": {"type": "worker", "index": 1}, "environment": "cloud"})
    job = res.resolve({"TF_CONFIG": tf_config, "CLUSTER_SPEC": _vertex(VERTEX, "workerpool1",
                                                                       1)})
    assert (job.engine, job.rank, job.size) == ("TF_CONFIG", 2, 3)


def test_vertex_reduction_server_and_evaluator_pools_are_not_ranks():
    cluster = dict(VERTEX, workerpool2=["rs-0:2222"], workerpool3=["ev-0:2222"])
    job = res.resolve({"CLUSTER_SPEC": _vertex(cluster, "workerpool1", 1)})
    assert (job.rank, job.size) == (2, 3)
    assert _error({"CLUSTER_SPEC": _vertex(cluster, "workerpool2", 0)}).startswith(
        "CLUSTER_SPEC: this process is task ps[0], and ps tasks are not ranks")
    assert tfc.tf_config_task({"CLUSTER_SPEC": _vertex(cluster, "workerpool3", 0)}) == (
        "evaluator", 0)


@pytest.mark.parametrize("environ,message", [
    ({"TF_CONFIG": json.dumps({"cluster": {"chief": VERTEX["workerpool0"],
                                           "worker": VERTEX["workerpool1"]},
                               "task": {"type": "worker", "index": 0}}),
      "CLUSTER_SPEC": _vertex(VERTEX, "workerpool1", 1)},
     "TF_CONFIG and CLUSTER_SPEC disagree: TF_CONFIG makes this process rank 1 of 3 meeting "
     "at cmle-training-workerpool0-1a-0:2222, CLUSTER_SPEC rank 2 of 3 meeting at "
     "cmle-training-workerpool0-1a-0:2222; set one of them, or the same cluster in both"),
    ({"CLUSTER_SPEC": _vertex(dict(VERTEX, workerpool7=["x:1"]), "workerpool1")},
     "CLUSTER_SPEC: cluster has 'workerpool7', not one of Vertex AI's worker pools "
     "workerpool0, workerpool1, workerpool2, workerpool3"),
    ({"CLUSTER_SPEC": _vertex(VERTEX, "chief")},
     "CLUSTER_SPEC: task.type is 'chief', not one of Vertex AI's worker pools workerpool0, "
     "workerpool1, workerpool2, workerpool3"),
    ({"CLUSTER_SPEC": _vertex(VERTEX, "workerpool1", 5)},
     "CLUSTER_SPEC: task.index=5 is out of range: cluster.worker has 2 task(s)"),
])
def test_vertex_errors(environ, message):
    assert _error(environ) == message


def test_tf_config_and_torchrun_variables_must_agree():
    env = _tf(CLUSTER, "worker", 0, RANK="2", WORLD_SIZE="3", MASTER_ADDR="c0",
              MASTER_PORT="2222")
    assert _error(env) == ("TF_CONFIG makes this process rank 1 of 3, but RANK=2 and "
                           "WORLD_SIZE=3; unset one of them")
    env["RANK"] = "1"
    assert res.resolve(env).engine == "TF_CONFIG"


def test_tf_config_wins_over_slurm_allocation_variables():
    env = _tf(CLUSTER, "worker", 1, SLURM_PROCID="0", SLURM_NTASKS="1")
    assert res.resolve(env).rank == 2

"""The example manifests for Kubeflow TFJob, Vertex AI custom jobs and Kubeflow Trainer v2
(python/examples/k8s) have the fields their operators need and describe the job tf_hvd
joins. Neither Kubernetes nor Vertex can run here:

* TFJob (kubeflow.org/v1; field names from kubeflow/trainer v1.9
  pkg/apis/kubeflow.org/v1/tensorflow_types.go): the TF_CONFIG the operator would give
  each pod (pkg/controller.v1/tensorflow/tensorflow.go genClusterSpec) is resolved with
  tf_hvd's own resolver;
* Vertex AI: the CLUSTER_SPEC of the two pools likewise; the secret placeholder is refused
  by tf_hvd until it is replaced at submission;
* Trainer v2 (trainer.kubeflow.org/v1alpha1): runtime and TrainJob agree with each other
  and with the MPI plugin's rules (pkg/runtime/framework/plugins/mpi/mpi.go); the launcher
  command is played on the namespace cluster by tests/parallel/test_k8s_contract.py.
"""

import json
import os
import re

import k8s_examples
import pytest

from tf_hvd.job import host_spec as hosts
from tf_hvd.job import mpi_operator_hostfile as mpi_operator
from tf_hvd.scheduler import SecretError
from tf_hvd.job.secret import job_secret
from tf_hvd.scheduler.tf_config import resolve_tf_config

K8S = k8s_examples.K8S
TFJOBS = ["tfjob-cpu.yaml", "tfjob-gpu.yaml"]
COMMAND = ["python", "/workspace/train.py"]
SECRET_ENV = "HOROVOD_GLOO_RENDEZVOUS_SECRET"


def _path(name):
    return os.path.join(K8S, name)


_load = k8s_examples.load


def _comments(name):
    with open(_path(name)) as f:
        return "\n".join(line.split("#", 1)[1] for line in f if "#" in line)


def test_every_manifest_is_tested():
    names = sorted(n for n in os.listdir(K8S) if n.endswith((".yaml", ".yml", ".json")))
    assert names == sorted(["mpijob-cpu.yaml", "mpijob-gpu.yaml"] + TFJOBS + [
        "vertex-customjob.yaml", "trainer-v2-runtime.yaml", "trainer-v2-trainjob.yaml"])


# --- TFJob -------------------------------------------------------------------------------

def _tfjob_container(spec):
    (c,) = spec["template"]["spec"]["containers"]
    return c


@pytest.mark.parametrize("name", TFJOBS)
def test_tfjob_fields(name):
    job = _load(name)
    assert job["apiVersion"] == "kubeflow.org/v1"
    assert job["kind"] == "TFJob"
    spec = job["spec"]
    assert spec["runPolicy"]["cleanPodPolicy"] in ("All", "Running", "None")
    assert spec["runPolicy"]["backoffLimit"] == 0
    replicas = spec["tfReplicaSpecs"]
    # A chief and workers; no PS (nor Evaluator, nor a second chief as "Master").
    assert sorted(replicas) == ["Chief", "Worker"]
    assert replicas["Chief"]["replicas"] == 1
    assert replicas["Worker"]["replicas"] >= 1
    secrets = set()
    for role, r in replicas.items():
        # a failed rank cannot rejoin running collectives: no restarts
        assert r["restartPolicy"] == "Never", role
        c = _tfjob_container(r)
        assert c["name"] == "tensorflow", role  # the operator's container name
        assert c["command"] == COMMAND, role
        assert "args" not in c, role
        assert {"name": "tfjob-port", "containerPort": 2222} in c["ports"], role
        (env,) = [e for e in c["env"] if e["name"] == SECRET_ENV]
        assert "value" not in env, role  # never a literal secret in the manifest
        ref = env["valueFrom"]["secretKeyRef"]
        secrets.add((ref["name"], ref["key"]))
    assert len(secrets) == 1  # every rank the same secret
    images = {_tfjob_container(r)["image"] for r in replicas.values()}
    assert len(images) == 1
    # The comment makes that Secret, with the same name and key, from a random value.
    (secret_name, key), = secrets
    text = _comments(name)
    assert re.search(r"kubectl create secret generic %s \\\s*--from-literal=%s=\"\$\(openssl "
                     r"rand -hex 32\)\"" % (re.escape(secret_name), re.escape(key)), text), text
    # What the image needs installed.
    extra = "and-cuda" if "gpu" in name else "tensorflow-cpu"
    assert 'pip install "tf_hvd[%s]"' % extra in text


def test_tfjob_gpu_one_gpu_per_rank():
    for r in _load("tfjob-gpu.yaml")["spec"]["tfReplicaSpecs"].values():
        assert _tfjob_container(r)["resources"]["limits"]["nvidia.com/gpu"] == 1


def test_tfjob_cpu_has_no_gpu():
    for r in _load("tfjob-cpu.yaml")["spec"]["tfReplicaSpecs"].values():
        assert "nvidia.com/gpu" not in _tfjob_container(r).get("resources", {}).get(
            "limits", {})


def _tfjob_tf_config(job, namespace="team"):
    """The TF_CONFIG cluster the operator gives each pod (genClusterSpec): lower-case
    replica types, "<job>-<type>-<i>.<namespace>.svc:<tfjob-port>" (headless Services)."""
    cluster = {}
    for role, r in job["spec"]["tfReplicaSpecs"].items():
        port = next(p["containerPort"] for p in _tfjob_container(r)["ports"]
                    if p["name"] == "tfjob-port")
        cluster[role.lower()] = ["%s-%s-%d.%s.svc:%d" % (job["metadata"]["name"], role.lower(),
                                                         i, namespace, port)
                                 for i in range(r["replicas"])]
    return cluster


@pytest.mark.parametrize("name", TFJOBS)
def test_tfjob_pods_resolve_to_one_job(name):
    job = _load(name)
    cluster = _tfjob_tf_config(job)
    chief = cluster["chief"][0].rsplit(":", 1)[0]
    size = len(cluster["chief"]) + len(cluster["worker"])
    tasks = [("chief", 0)] + [("worker", i) for i in range(len(cluster["worker"]))]
    for rank, (kind, index) in enumerate(tasks):
        env = {"TF_CONFIG": json.dumps({"cluster": cluster,
                                        "task": {"type": kind, "index": index}})}
        j = resolve_tf_config(env)
        assert (j.rank, j.size) == (rank, size)
        # rank 0 (the chief) serves the rendezvous at its own Service, port 2222
        assert (j.master_addr, j.master_port) == (chief, 2222)
        assert (j.local_rank, j.local_size) == (0, 1)  # one rank per pod


# --- Vertex AI ---------------------------------------------------------------------------

def _keys(obj):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from _keys(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _keys(v)


def test_vertex_customjob_spec():
    spec = _load("vertex-customjob.yaml")
    # gcloud --config takes a CustomJobSpec in camelCase ("keys with underscore are invalid")
    assert not [k for k in _keys(spec) if "_" in k]
    assert set(spec) <= {"workerPoolSpecs", "serviceAccount", "network", "scheduling",
                         "baseOutputDirectory"}
    pools = spec["workerPoolSpecs"]
    # workerpool0 = the chief (rank 0), workerpool1 = the workers; no ps/reduction server
    # (workerpool2) and no evaluators (workerpool3)
    assert len(pools) == 2
    assert pools[0]["replicaCount"] == 1
    assert pools[1]["replicaCount"] >= 1
    for pool in pools:
        assert pool["machineSpec"]["machineType"]
        assert set(pool["containerSpec"]) == {"imageUri", "command", "env"}
        assert pool["containerSpec"]["command"] == COMMAND
    assert pools[0]["containerSpec"] == pools[1]["containerSpec"]


def _vertex_secret_value():
    spec = _load("vertex-customjob.yaml")
    values = {e["value"] for p in spec["workerPoolSpecs"] for e in p["containerSpec"]["env"]
              if e["name"] == SECRET_ENV}
    assert len(values) == 1
    return values.pop()


def test_vertex_secret_is_written_at_submission():
    placeholder = _vertex_secret_value()
    text = _comments("vertex-customjob.yaml")
    # The comment's sed replaces exactly this placeholder with a fresh random secret.
    assert 'sed "s/%s/$(openssl rand -hex 32)/"' % placeholder in text
    assert "--config=job.yaml" in text
    # Left in place, tf_hvd refuses it rather than meet with a known secret.
    with pytest.raises(SecretError):
        job_secret({SECRET_ENV: placeholder})
    assert job_secret({SECRET_ENV: "ab" * 32}) == ("ab" * 32, SECRET_ENV)
    # and the comment says who can read it
    assert "aiplatform.customJobs.get" in text


def test_vertex_replicas_resolve_to_one_job():
    spec = _load("vertex-customjob.yaml")
    counts = [p["replicaCount"] for p in spec["workerPoolSpecs"]]
    cluster = {"workerpool%d" % i: ["cmle-training-workerpool%d-ab12-%d:2222" % (i, r)
                                    for r in range(n)] for i, n in enumerate(counts)}
    tasks = [("workerpool%d" % i, r) for i, n in enumerate(counts) for r in range(n)]
    for rank, (pool, index) in enumerate(tasks):
        env = {"CLUSTER_SPEC": json.dumps({"cluster": cluster, "environment": "cloud",
                                           "task": {"type": pool, "index": index}})}
        j = resolve_tf_config(env)
        assert (j.rank, j.size) == (rank, sum(counts))
        assert (j.master_addr, j.master_port) == ("cmle-training-workerpool0-ab12-0", 2222)


# --- Kubeflow Trainer v2 -----------------------------------------------------------------

def _trainer_container(rjob):
    (c,) = rjob["template"]["spec"]["template"]["spec"]["containers"]
    return c


def test_trainer_v2_runtime_fields():
    rt = _load("trainer-v2-runtime.yaml")
    assert rt["apiVersion"] == "trainer.kubeflow.org/v1alpha1"
    assert rt["kind"] == "ClusterTrainingRuntime"
    policy = rt["spec"]["mlPolicy"]
    # Only the MPI policy; the launcher Job's pod count comes from mlPolicy.numNodes.
    assert set(policy) == {"numNodes", "mpi"} and policy["numNodes"] == 1
    mpi = policy["mpi"]
    assert mpi["mpiImplementation"] == "OpenMPI"  # the only one the plugin writes
    assert mpi["runLauncherAsNode"] is True
    assert mpi["numProcPerNode"] >= 1
    js = rt["spec"]["template"]["spec"]
    assert js["network"]["publishNotReadyAddresses"] is True
    assert js["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["launcher"]}
    rjobs = js["replicatedJobs"]
    # JobSet: dependsOn may name only an earlier replicated job, so "node" comes first
    # (and the hostfile lists the launcher last).
    assert [r["name"] for r in rjobs] == ["node", "launcher"]
    node, launcher = rjobs
    assert launcher["dependsOn"] == [{"name": "node", "status": "Ready"}]
    assert launcher["template"]["metadata"]["labels"][
        "trainer.kubeflow.org/trainjob-ancestor-step"] == "trainer"
    assert "labels" not in node["template"].get("metadata", {})
    # The plugin mounts the hostfile and ssh keys, and the TrainJob's command replaces the
    # command, only in containers named "node".
    nc, lc = _trainer_container(node), _trainer_container(launcher)
    assert nc["name"] == lc["name"] == "node"
    assert nc["image"] == lc["image"]
    assert "command" not in lc and "args" not in lc  # the TrainJob gives it
    # Nodes serve ssh as the non-root user whose home holds the keys (mounted 0640, which
    # ssh accepts only from a key another user owns), on port 2222, checked before the
    # launcher starts.
    home = mpi["sshAuthMountPath"].rsplit("/.ssh", 1)[0]
    assert mpi["sshAuthMountPath"] == home + "/.ssh" and home != "/root"
    assert nc["command"] == ["/usr/sbin/sshd"]
    assert nc["args"] == ["-De", "-f", home + "/.sshd_config"]
    assert nc["readinessProbe"]["tcpSocket"]["port"] == 2222
    for rjob in rjobs:
        pod = rjob["template"]["spec"]["template"]["spec"]
        uid = _trainer_container(rjob)["securityContext"]["runAsUser"]
        assert uid != 0 and pod["securityContext"]["fsGroup"] == uid


def test_trainer_v2_trainjob_matches_its_runtime():
    rt, job = _load("trainer-v2-runtime.yaml"), _load("trainer-v2-trainjob.yaml")
    assert job["apiVersion"] == "trainer.kubeflow.org/v1alpha1"
    assert job["kind"] == "TrainJob"
    ref = job["spec"]["runtimeRef"]
    assert ref == {"name": rt["metadata"]["name"], "apiGroup": "trainer.kubeflow.org",
                   "kind": rt["kind"]}
    trainer = job["spec"]["trainer"]
    nodes, per_node = trainer["numNodes"], trainer["numProcPerNode"]
    assert nodes >= 2  # with runLauncherAsNode: the launcher and numNodes - 1 node pods
    cmd = trainer["command"]
    # tfhvdrun with one rank per slot of every pod (the launcher's included), and no
    # -H/--hostfile: it reads the plugin's /etc/mpi/hostfile (OMPI_MCA_orte_default_hostfile)
    assert cmd[0] == "tfhvdrun"
    assert int(cmd[cmd.index("-np") + 1]) == nodes * per_node
    assert not {"-H", "--hosts", "--hostfile", "-hostfile"} & set(cmd)
    assert cmd[-2:] == COMMAND
    # Variables the plugin owns must not be set by the TrainJob (the webhook refuses them).
    reserved = {"OMPI_MCA_orte_default_hostfile", "OMPI_MCA_plm_rsh_args",
                "OMPI_MCA_orte_keep_fqdn_hostnames", "OMPI_MCA_orte_set_default_slots"}
    assert not reserved & {e["name"] for e in trainer.get("env", [])}
    assert "nvidia.com/gpu" not in trainer["resourcesPerNode"]["limits"]


def test_trainer_v2_hostfile_is_what_tfhvdrun_reads(tmp_path):
    """The plugin's hostfile for this TrainJob (as test_k8s_contract.py derives it) parses
    into the hosts tfhvdrun places -np ranks on."""
    rt, job = k8s_examples.trainer_v2()
    lines = k8s_examples.trainer_v2_hostfile(rt, job)
    name = job["metadata"]["name"]
    assert [d for d, _ in lines] == ["%s-node-0-0.%s" % (name, name),
                                     "%s-node-0-1.%s" % (name, name),
                                     "%s-launcher-0-0.%s" % (name, name)]
    path = tmp_path / "hostfile"
    path.write_text("".join("%s slots=%d\n" % e for e in lines))
    got, where = mpi_operator.hostfile_hosts(
        {"OMPI_MCA_orte_default_hostfile": str(path)}, hosts.parse_hostfile)
    assert [(h.name, h.slots) for h in got] == lines
    assert "OMPI_MCA_orte_default_hostfile" in where
    np_ = int(job["spec"]["trainer"]["command"][2])
    assert hosts.total_slots(got) == np_

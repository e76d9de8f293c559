"""The example MPIJob manifests (python/examples/k8s) have the fields the MPI Operator
(kubeflow.org/v2beta1) needs and launch tf_hvd the way tests/parallel/test_k8s_contract.py
checks on the namespace cluster. Kubernetes itself cannot run here."""

import glob
import os

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
K8S = os.path.join(REPO, "python", "examples", "k8s")
MANIFESTS = sorted(glob.glob(os.path.join(K8S, "mpijob-*.yaml")))


def _load(path):
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    assert len(docs) == 1, path
    return docs[0]


def test_both_manifests_exist():
    assert [os.path.basename(p) for p in MANIFESTS] == ["mpijob-cpu.yaml", "mpijob-gpu.yaml"]


@pytest.mark.parametrize("path", MANIFESTS, ids=os.path.basename)
def test_mpijob_fields(path):
    job = _load(path)
    assert job["apiVersion"] == "kubeflow.org/v2beta1"
    assert job["kind"] == "MPIJob"
    spec = job["spec"]
    slots = spec["slotsPerWorker"]
    assert isinstance(slots, int) and slots >= 1
    assert spec["launcherCreationPolicy"] == "WaitForWorkersReady"
    assert spec["mpiImplementation"] in ("OpenMPI", "MPICH", "Intel")
    assert spec["sshAuthMountPath"] == "/root/.ssh"
    replicas = spec["mpiReplicaSpecs"]
    assert sorted(replicas) == ["Launcher", "Worker"]
    assert replicas["Launcher"]["replicas"] == 1
    workers = replicas["Worker"]["replicas"]
    (launcher,) = replicas["Launcher"]["template"]["spec"]["containers"]
    (worker,) = replicas["Worker"]["template"]["spec"]["containers"]
    # The launcher runs tfhvdrun with one rank per slot of every worker, no -H/--hostfile:
    # it takes the operator's /etc/mpi/hostfile (tf_hvd/job/mpi_operator_hostfile.py).
    cmd = launcher["command"]
    assert cmd[0] == "tfhvdrun"
    assert int(cmd[cmd.index("-np") + 1]) == workers * slots
    assert "-H" not in cmd and "--hostfile" not in cmd
    assert "python" in cmd
    # Workers only serve ssh; ranks are started there by the launcher.
    assert worker["command"] == ["/usr/sbin/sshd", "-De"]


def test_gpu_manifest_one_rank_per_gpu():
    spec = _load(os.path.join(K8S, "mpijob-gpu.yaml"))["spec"]
    (worker,) = spec["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == spec["slotsPerWorker"]
    (launcher,) = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"]
    assert "nvidia.com/gpu" not in launcher["resources"]["limits"]


def test_cpu_manifest_has_no_gpu():
    spec = _load(os.path.join(K8S, "mpijob-cpu.yaml"))["spec"]
    for role in ("Launcher", "Worker"):
        (c,) = spec["mpiReplicaSpecs"][role]["template"]["spec"]["containers"]
        assert "nvidia.com/gpu" not in c["resources"]["limits"]

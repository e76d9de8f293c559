"""The example manifests in python/examples/k8s, and what Kubeflow Trainer's MPI plugin
makes of the Trainer v2 pair (shared by tests/unit/test_k8s_manifests_tf.py and
tests/parallel/test_k8s_contract.py)."""

import os

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
K8S = os.path.join(REPO, "python", "examples", "k8s")


def load(name):
    """The one document in python/examples/k8s/<name>."""
    with open(os.path.join(K8S, name)) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    assert len(docs) == 1, name
    return docs[0]


def trainer_v2():
    """(ClusterTrainingRuntime, TrainJob) of trainer-v2-runtime.yaml, trainer-v2-trainjob.yaml."""
    return load("trainer-v2-runtime.yaml"), load("trainer-v2-trainjob.yaml")


def trainer_v2_hostfile(runtime, job):
    """The hostfile Trainer's MPI plugin writes for this TrainJob on this runtime, as
    [(pod DNS name, slots), ...] ("<name> slots=<n>" lines, OpenMPI's form).

    kubeflow/trainer pkg/runtime/framework/plugins/mpi/mpi.go: buildHostFileConfigMap
    lists the endpoints of every pod set that is a node (the launcher too with
    runLauncherAsNode), in the runtime's replicatedJobs order, with numProcPerNode slots
    (the TrainJob's, else the runtime's); EnforceMLPolicy makes the "node" Job
    numNodes - 1 pods with runLauncherAsNode (at least 1), else numNodes; the launcher
    Job has mlPolicy.numNodes pods (1). plugins/jobset/jobset.go: syncPodNetwork names
    pod i of replica 0 of Job <rjob> "<trainjob>-<rjob>-0-<i>.<subdomain>", the subdomain
    being the TrainJob's name.
    """
    policy = runtime["spec"]["mlPolicy"]
    mpi = policy["mpi"]
    as_node = mpi.get("runLauncherAsNode", False)
    slots = job["spec"]["trainer"].get("numProcPerNode", mpi.get("numProcPerNode", 1))
    num_nodes = job["spec"]["trainer"]["numNodes"]
    name = job["metadata"]["name"]
    lines = []
    for rjob in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        if rjob["name"] == "node":
            count = max(num_nodes - 1, 1) if as_node else num_nodes
        elif rjob["name"] == "launcher" and as_node:
            count = policy.get("numNodes", 1)
        else:
            continue
        lines += [("%s-%s-0-%d.%s" % (name, rjob["name"], i, name), slots)
                  for i in range(count)]
    return lines

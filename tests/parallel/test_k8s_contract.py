"""The pod-level contract of Kubeflow's MPI Operator (MPIJob v2beta1), played on the
namespace cluster: Kubernetes cannot run here, so h1 is the launcher pod and h2, h3 the
worker pods, set up as the operator sets them up:

* the workers run sshd; the launcher has the job's ssh key (the operator's Secret:
  id_rsa, id_rsa.pub, authorized_keys) and an ssh config that does not check host keys;
* the launcher has the hostfile at <dir>/hostfile (/etc/mpi/hostfile in a pod) in the
  operator's format for the MPI flavour (``host slots=N`` for Open MPI, ``host:N`` for
  MPICH) and the operator's environment (OMPI_MCA_orte_default_hostfile, ...,
  HYDRA_HOST_FILE, HYDRA_LAUNCH_EXTRA_ARGS, K_MPI_JOB_ROLE=launcher);
* the launcher is not a worker: it runs no rank.

The launcher's command is the one in python/examples/k8s: ``tfhvdrun -np N ...`` (Gloo)
and ``tfhvdrun --mpi -np N ...``, with no -H and no ssh flags.

Kubeflow Trainer v2's MPI runtime (python/examples/k8s/trainer-v2-*.yaml) is played the
same way, with what its MPI plugin gives the launcher (see the comment above its test):
the TrainJob's exact command, the hostfile the plugin would write for it, the launcher
also a node (runLauncherAsNode). Skipped, with the reason, where the namespace cluster
cannot run (not root, no ip/sshd).
"""

import json
import os
import re
import shutil

import pytest

import k8s_examples
from jobrunner import PYTHON, REPO, base_env, run
from namespace_hosts import namespace_cluster, netns_cluster

HERE = os.path.dirname(os.path.abspath(__file__))

WORKER = os.path.join(HERE, "workers", "engine_checks.py")
TIMEOUT = 240


@pytest.fixture(scope="module")
def pods(tmp_path_factory):
    with namespace_cluster(3, __name__) as c:
        # The operator's ssh Secret, and an image's ssh config that trusts any host key.
        d = tmp_path_factory.mktemp("launcher")
        ssh = d / "ssh"
        ssh.mkdir(mode=0o700)
        shutil.copy(c.client_key, ssh / "id_rsa")
        shutil.copy(c.client_key + ".pub", ssh / "id_rsa.pub")
        shutil.copy(c.client_key + ".pub", ssh / "authorized_keys")
        os.chmod(ssh / "id_rsa", 0o600)
        etc = d / "etc-ssh"
        etc.mkdir()
        (etc / "ssh_config").write_text(
            "Host *\n    User root\n    IdentityFile %s\n    StrictHostKeyChecking no\n"
            "    UserKnownHostsFile /dev/null\n    LogLevel ERROR\n" % (ssh / "id_rsa"))
        c.launcher_dir = d
        yield c


def _launcher(pods, flavour, hostfile_text, tfhvdrun_args):
    hostfile = pods.launcher_dir / ("hostfile-" + flavour)
    hostfile.write_text(hostfile_text)
    env = base_env({"K_MPI_JOB_ROLE": "launcher"})
    if flavour == "openmpi":
        env.update({"OMPI_MCA_orte_keep_fqdn_hostnames": "true",
                    "OMPI_MCA_orte_default_hostfile": str(hostfile),
                    "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10"})
    else:
        env.update({"HYDRA_HOST_FILE": str(hostfile),
                    "HYDRA_LAUNCH_EXTRA_ARGS": "-o ConnectionAttempts=10"})
    if "--mpi" in tfhvdrun_args:
        # The namespace hosts share one kernel, which UCX takes for one machine (its
        # shared-memory transports then fail between them); pods do not: use TCP.
        env["UCX_TLS"] = "tcp,self"
    mount = 'mount --bind "$0" /etc/ssh && exec "$@"'
    cmd = pods.exec_argv("h1", ["sh", "-c", mount, str(pods.launcher_dir / "etc-ssh"),
                                PYTHON, "-m", "tf_hvd.runner"] + tfhvdrun_args
                         + [PYTHON, WORKER])
    return run(cmd, TIMEOUT, env=env, cwd=REPO)


def _results(out):
    return {int(m.group(1)): json.loads(m.group(2))
            for m in re.finditer(r"^\[(\d+)\]<stdout>:ENGINE_RESULT (.*)$", out, re.M)}


def _leftovers(pods):
    sshd = set(pods.sshd_pids.values())
    return [(h, p) for h in pods.hosts for p in pods.processes_in(h) if p not in sshd]


@pytest.mark.parametrize("flavour,hostfile,args,transport", [
    ("mpich", "h2:2\nh3:2\n", ["-np", "4"], "gloo"),
    ("openmpi", "h2 slots=1\nh3 slots=1\n", ["--mpi", "-np", "2"], "mpi"),
])
def test_mpijob_launcher_runs_tfhvdrun_on_the_workers(pods, flavour, hostfile, args,
                                                      transport):
    res = _launcher(pods, flavour, hostfile, args)
    assert res.ok, res.describe()
    got = _results(res.output)
    np_ = int(args[-1])
    per_worker = np_ // 2
    assert sorted(got) == list(range(np_)), res.describe()
    for rank, r in got.items():
        assert r["size"] == np_ and r[transport] and r["sum_exact"], r
        # ranks fill h2 then h3; none on the launcher h1
        assert r["host"] == "h%d" % (2 + rank // per_worker), r
        assert (r["local_size"], r["cross_size"]) == (per_worker, 2), r
        assert not r["secret_on_cmdline"], r
    assert _leftovers(pods) == []


# Kubeflow Trainer v2 (trainer.kubeflow.org/v1alpha1) with the MPI policy, as
# python/examples/k8s/trainer-v2-*.yaml use it. What its MPI plugin gives the launcher
# (kubeflow/trainer pkg/runtime/framework/plugins/mpi/mpi.go, constants in
# pkg/constants/constants.go; JobSet endpoints in plugins/jobset/jobset.go):
# * the hostfile ConfigMap mounted at /etc/mpi/hostfile, one line per pod of each
#   replicated job that is a node, in the runtime's replicatedJobs order (the launcher
#   too with runLauncherAsNode): "<trainjob>-<rjob>-0-<i>.<trainjob> slots=<numProcPerNode>";
# * on the launcher's "node" container: OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile,
#   OMPI_MCA_orte_keep_fqdn_hostnames=true, OMPI_MCA_orte_set_default_slots=<slots>,
#   OMPI_MCA_plm_rsh_args="-o ConnectionAttempts=10";
# * the job's ssh key pair at sshAuthMountPath in every pod; the nodes run sshd on port
#   2222 and the image's ssh client config (mpioperator/base's) uses that port and skips
#   host-key checks.
# Here h2, h3 are the "node" pods, h1 the launcher, and the pods' DNS names are aliases
# in the hosts' /etc/hosts. The hostfile is written at <dir>/hostfile rather than
# /etc/mpi/hostfile (tfhvdrun reads the path from the variable, as mpirun does).


@pytest.fixture
def pod_names(pods):
    """Adds the pods' DNS names to the hosts' /etc/hosts (in place: the files are bind
    mounted in the namespaces) for one test, then puts the files back."""
    saved = {}

    def alias(names):  # {host: [dns name, ...]}
        for host in pods.hosts:
            path = os.path.join(netns_cluster.NETNS_ETC, pods.netns(host), "hosts")
            with open(path) as f:
                saved.setdefault(path, f.read())
            with open(path, "a") as f:
                for h, dns in names.items():
                    f.write("".join("%s %s\n" % (pods.address(h), d) for d in dns))
    yield alias
    for path, text in saved.items():
        with open(path, "r+") as f:
            f.write(text)
            f.truncate()


def test_trainer_v2_mpi_launcher_runs_the_trainjob_command(pods, pod_names):
    runtime, job = k8s_examples.trainer_v2()
    hostfile = k8s_examples.trainer_v2_hostfile(runtime, job)
    # node pods in order, then the launcher (runLauncherAsNode): h2, h3, then h1
    roles = [dns.split(".")[0].rsplit("-", 3)[1] for dns, _ in hostfile]
    assert roles == ["node", "node", "launcher"], hostfile
    host_of = dict(zip([dns for dns, _ in hostfile], ["h2", "h3", "h1"]))
    pod_names({h: [d for d, hh in host_of.items() if hh == h] for h in ("h1", "h2", "h3")})

    d = pods.launcher_dir
    (d / "trainer-hostfile").write_text("".join("%s slots=%d\n" % e for e in hostfile))
    slots = hostfile[0][1]
    etc = d / "etc-ssh-trainer"  # mpioperator/base's ssh_config: port 2222, no host keys
    etc.mkdir(exist_ok=True)
    # The launcher pod runs no sshd: ssh to its own name must fail (port 9 has no
    # listener), so its ranks run only if tfhvdrun starts them locally.
    launcher = [dns for dns, h in host_of.items() if h == "h1"]
    (etc / "ssh_config").write_text(
        "".join("Host %s\n    Port 9\n" % n for n in launcher) +
        "Host *\n    Port 2222\n    StrictHostKeyChecking no\n"
        "    UserKnownHostsFile /dev/null\n    User root\n    IdentityFile %s\n"
        "    LogLevel ERROR\n" % (d / "ssh" / "id_rsa"))
    env = base_env({
        "OMPI_MCA_orte_default_hostfile": str(d / "trainer-hostfile"),
        "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
        "OMPI_MCA_orte_set_default_slots": str(slots),
        "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
    })
    for name in [n for n in env if n.startswith(("SLURM_", "HOROVOD_GLOO_RENDEZVOUS"))]:
        del env[name]
    # The TrainJob's command, exactly: tfhvdrun <its flags> python /workspace/train.py,
    # with the program swapped for the checks.
    command = job["spec"]["trainer"]["command"]
    assert command[0] == "tfhvdrun" and command[-2:] == ["python", "/workspace/train.py"]
    argv = [PYTHON, "-m", "tf_hvd.runner"] + command[1:-2] + [PYTHON, WORKER]
    mount = 'mount --bind "$0" /etc/ssh && exec "$@"'
    res = run(pods.exec_argv("h1", ["sh", "-c", mount, str(etc)] + argv), TIMEOUT,
              env=env, cwd=REPO)
    assert res.ok, res.describe()
    got = _results(res.output)
    np_ = int(command[command.index("-np") + 1])
    assert np_ == len(hostfile) * slots
    assert sorted(got) == list(range(np_)), res.describe()
    for rank, r in got.items():
        assert r["size"] == np_ and r["gloo"] and r["sum_exact"], r
        assert r["gathered"] == list(range(np_)) and r["broadcast"] == [7.5], r
        # ranks fill the hostfile in order: the nodes first, the launcher's own last
        assert r["host"] == host_of[hostfile[rank // slots][0]], r
        assert (r["local_rank"], r["local_size"]) == (rank % slots, slots), r
        assert (r["cross_rank"], r["cross_size"]) == (rank // slots, len(hostfile)), r
        assert not r["secret_on_cmdline"], r
    assert _leftovers(pods) == []

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
and ``tfhvdrun --mpi -np N ...``, with no -H and no ssh flags. Skipped, with the reason,
where the namespace cluster cannot run (not root, no ip/sshd).
"""

import json
import os
import re
import shutil
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools"))

import netns_cluster  # noqa: E402
from jobrunner import PYTHON, REPO, base_env, run  # noqa: E402

WORKER = os.path.join(HERE, "workers", "engine_checks.py")
TIMEOUT = 240


@pytest.fixture(scope="module")
def pods(tmp_path_factory):
    reason = netns_cluster.Cluster.available()
    if reason:
        pytest.skip("no namespace cluster: %s" % reason)
    c = netns_cluster.Cluster(3, name="tfk%d" % (os.getpid() % 1000))
    with c:
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

"""The engine environment resolver (tf_hvd.scheduler): Slurm's and torchrun's variables
mapped onto the core's HOROVOD_* variables, Slurm's host list syntax, the secret file."""

import os
import stat

import pytest

from tf_hvd.job import slurm_hostlist as hostlist
from tf_hvd.job import secret as sec
from tf_hvd.scheduler import engine_env as res

TORCH = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
         "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
SLURM = {"SLURM_PROCID": "2", "SLURM_NTASKS": "3", "SLURM_STEP_NUM_TASKS": "3",
         "SLURM_STEP_ID": "0", "SLURM_JOB_ID": "77", "SLURM_LOCALID": "0",
         "SLURM_NODEID": "1", "SLURM_STEP_NODELIST": "node[07-08]",
         "SLURM_STEP_TASKS_PER_NODE": "2,1"}


@pytest.mark.parametrize("text,hosts", [
    ("h1", ["h1"]),
    ("h[1-3]", ["h1", "h2", "h3"]),
    ("gpu[08-10,3],cpu5", ["gpu08", "gpu09", "gpu10", "gpu3", "cpu5"]),
    ("r[1-2]n[01-02]", ["r1n01", "r1n02", "r2n01", "r2n02"]),
    ("a[9-10]-ib", ["a9-ib", "a10-ib"]),
])
def test_hostlist_expands_like_scontrol(text, hosts):
    assert hostlist.expand_hostlist(text) == hosts


@pytest.mark.parametrize("text,message", [
    ("h[1-3", "unbalanced '[' in host list 'h[1-3'"),
    ("h[3-1]", "descending range '3-1' in host list 'h[3-1]'"),
    ("h[a-b]", "malformed range 'a-b' in host list 'h[a-b]'"),
    ("h1,,h2", "empty entry in host list 'h1,,h2'"),
])
def test_hostlist_errors(text, message):
    with pytest.raises(hostlist.HostlistError) as e:
        hostlist.expand_hostlist(text)
    assert str(e.value) == message


def test_tasks_per_node():
    assert hostlist.expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    with pytest.raises(hostlist.HostlistError, match=r"malformed tasks-per-node entry 'x'"):
        hostlist.expand_tasks_per_node("2,x")


def test_torchrun_job():
    job = res.resolve(TORCH)
    assert job == res.Job("torchrun", 3, 4, 1, 2, 1, 2, "10.0.0.1", 29500, None)
    env = res.horovod_env(job, "10.0.0.9")
    assert env["HOROVOD_RANK"] == "3" and env["HOROVOD_SIZE"] == "4"
    assert env["HOROVOD_LOCAL_SIZE"] == "2" and env["HOROVOD_CROSS_RANK"] == "1"
    assert env["HOROVOD_GLOO_RENDEZVOUS_ADDR"] == "10.0.0.1"
    assert env["HOROVOD_GLOO_RENDEZVOUS_PORT"] == "29500"
    assert env["HOROVOD_HOSTNAME"] == "10.0.0.9"


def test_torchrun_group_variables_and_one_rank_per_pod():
    env = dict(TORCH, GROUP_RANK="5", GROUP_WORLD_SIZE="6")
    assert res.resolve(env)[5:7] == (5, 6)
    env = {k: v for k, v in TORCH.items() if not k.startswith("LOCAL_")}
    assert res.resolve(env)[1:7] == (3, 4, 0, 1, 3, 4)


@pytest.mark.parametrize("env", [
    {},                                                     # no engine
    {"RANK": "0", "WORLD_SIZE": "1"},                       # a job of one
    dict(TORCH, HOROVOD_RANK="0"),                          # tfhvdrun started it
    dict(TORCH, PMI_RANK="0"),                              # mpiexec / srun --mpi=pmi2
    dict(SLURM, OMPI_COMM_WORLD_RANK="2"),                  # mpirun inside Slurm
    dict(TORCH, HOROVOD_CONTROLLER="mpi"),
    dict(SLURM, SLURM_NTASKS="1", SLURM_STEP_NUM_TASKS="1"),
])
def test_nothing_to_do(env):
    assert res.resolve(env) is None


@pytest.mark.parametrize("change,message", [
    ({"MASTER_PORT": None}, "but MASTER_PORT is not set, so it cannot meet the other ranks"),
    ({"RANK": "4"}, "RANK=4 is not below WORLD_SIZE=4"),
    ({"WORLD_SIZE": "two"}, "WORLD_SIZE='two' is not an integer"),
    ({"MASTER_PORT": "70000"}, "MASTER_PORT=70000 is not a TCP port"),
    ({"LOCAL_RANK": "2"}, "LOCAL_RANK=2, LOCAL_WORLD_SIZE=2 and WORLD_SIZE=4 do not fit"),
])
def test_torchrun_errors(change, message):
    env = dict(TORCH)
    for k, v in change.items():
        if v is None:
            del env[k]
        else:
            env[k] = v
    with pytest.raises(res.SchedulerEnvError) as e:
        res.resolve(env)
    assert message in str(e.value)


def test_slurm_job_uneven_nodes():
    job = res.resolve(SLURM)
    # rank 2 is alone on node08: local 0 of 1; both nodes run a local rank 0.
    assert job == res.Job("slurm", 2, 3, 0, 1, 1, 2, "node07",
                          res.PORT_BASE + (77 * 31) % res.PORT_SPAN, "node08")
    # local rank 1 exists on node07 only: a cross size of one (as Horovod counts it)
    job = res.resolve(dict(SLURM, SLURM_PROCID="1", SLURM_LOCALID="1", SLURM_NODEID="0"))
    assert (job.cross_rank, job.cross_size, job.local_size) == (0, 1, 2)
    job = res.resolve(dict(SLURM, MASTER_ADDR="login1", MASTER_PORT="4000"))
    assert (job.master_addr, job.master_port) == ("login1", 4000)


def test_slurm_batch_script_does_not_train_alone():
    env = {k: v for k, v in SLURM.items() if k not in ("SLURM_STEP_ID", "SLURM_STEP_NUM_TASKS")}
    with pytest.raises(res.SchedulerEnvError) as e:
        res.resolve(env)
    assert str(e.value).startswith(
        "Slurm (srun): SLURM_NTASKS=3 but this process is not a task of a job step")


def test_slurm_rank0_off_the_first_node():
    env = dict(SLURM, SLURM_PROCID="0")
    with pytest.raises(res.SchedulerEnvError) as e:
        res.resolve(env)
    assert "rank 0 runs on node08, not on the step's first node node07" in str(e.value)


def test_slurm_inconsistent_counts():
    with pytest.raises(res.SchedulerEnvError) as e:
        res.resolve(dict(SLURM, SLURM_STEP_TASKS_PER_NODE="2(x2)"))
    assert "do not make 3 tasks" in str(e.value)


def test_secret_from_environment():
    value = "ab" * 32
    assert sec.job_secret({sec.SECRET_ENV: value}) == (value, sec.SECRET_ENV)
    with pytest.raises(sec.SecretError, match="holds 5 characters; a secret needs at least 32"):
        sec.job_secret({sec.SECRET_ENV: "short"})


def test_secret_file_created_private_and_reused(tmp_path):
    path = str(tmp_path / "d" / "secret")
    first, where = sec.job_secret({sec.SECRET_FILE_ENV: path})
    assert where == path and len(first) == 64
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    assert sec.job_secret({sec.SECRET_FILE_ENV: path})[0] == first
    assert sorted(os.listdir(os.path.dirname(path))) == ["secret"]  # no temporary left


def test_secret_file_default_in_home(tmp_path):
    value, where = sec.job_secret({"HOME": str(tmp_path)})
    assert where == str(tmp_path / ".tf_hvd" / "rendezvous_secret")
    assert open(where).read().strip() == value


# -- tfhvdrun inside an allocation (tf_hvd.job.slurm_allocation) ---------------------------------

from tf_hvd.job import slurm_allocation as runner_slurm  # noqa: E402
from tf_hvd.job.host_spec import HostSlots, HostSpecError  # noqa: E402

ALLOC = {"SLURM_JOB_ID": "9", "SLURM_JOB_NODELIST": "n[1-3]",
         "SLURM_TASKS_PER_NODE": "2(x2),1", "SLURM_JOB_CPUS_PER_NODE": "8(x3)"}


def test_allocation_hosts_from_tasks_then_cpus():
    hosts, where = runner_slurm.allocation_hosts(ALLOC)
    assert hosts == [HostSlots("n1", 2), HostSlots("n2", 2), HostSlots("n3", 1)]
    assert where == ("the Slurm allocation (SLURM_JOB_NODELIST=n[1-3], "
                     "SLURM_TASKS_PER_NODE=2(x2),1)")
    no_tasks = {k: v for k, v in ALLOC.items() if k != "SLURM_TASKS_PER_NODE"}
    assert runner_slurm.allocation_hosts(no_tasks)[0] == [HostSlots("n%d" % i, 8)
                                                           for i in (1, 2, 3)]


def test_no_allocation_inside_a_step_or_outside_slurm():
    assert runner_slurm.allocation_hosts(dict(ALLOC, SLURM_STEP_ID="0")) is None
    assert runner_slurm.allocation_hosts({}) is None
    assert runner_slurm.launcher_for(True, ALLOC) is None  # -H or --hostfile given
    assert runner_slurm.launcher_for(False, dict(ALLOC, TF_HVD_SLURM_LAUNCH="ssh")) is None


def test_allocation_counts_mismatch():
    with pytest.raises(HostSpecError) as e:
        runner_slurm.allocation_hosts(dict(ALLOC, SLURM_TASKS_PER_NODE="2"))
    assert str(e.value) == ("the Slurm allocation: 3 nodes (SLURM_JOB_NODELIST=n[1-3]) but 1 "
                            "counts in SLURM_TASKS_PER_NODE")


def test_srun_argv():
    assert runner_slurm.srun_argv("n2", ["python", "t.py"], "/w")[1:] == [
        "--nodes=1", "--ntasks=1", "--nodelist=n2", "--overlap", "--export=ALL",
        "--kill-on-bad-exit=1", "--quiet", "--unbuffered", "--chdir=/w", "python", "t.py"]


# -- tfhvdrun in an MPI Operator launcher pod (tf_hvd.job.mpi_operator_hostfile) ---------------

from tf_hvd.job import host_spec as runner_hosts  # noqa: E402
from tf_hvd.job import mpi_operator_hostfile as mpi_operator  # noqa: E402


@pytest.mark.parametrize("var,text", [
    ("OMPI_MCA_orte_default_hostfile", "job-worker-0.job.ns.svc slots=2\n"
                                       "job-worker-1.job.ns.svc slots=2\n"),
    ("HYDRA_HOST_FILE", "job-worker-0.job.ns.svc:2\njob-worker-1.job.ns.svc:2\n"),
    ("I_MPI_HYDRA_HOST_FILE", "job-worker-0.job.ns.svc:2\njob-worker-1.job.ns.svc:2\n"),
])
def test_operator_hostfile_formats(tmp_path, var, text):
    path = tmp_path / "hostfile"
    path.write_text(text)
    hosts, where = mpi_operator.hostfile_hosts({var: str(path)}, runner_hosts.parse_hostfile)
    assert hosts == [HostSlots("job-worker-0.job.ns.svc", 2),
                     HostSlots("job-worker-1.job.ns.svc", 2)]
    assert where == "the MPI launcher's hostfile (%s=%s)" % (var, path)


def test_operator_hostfile_absent(tmp_path):
    missing = {"OMPI_MCA_orte_default_hostfile": str(tmp_path / "nope")}
    assert mpi_operator.hostfile_hosts(missing, runner_hosts.parse_hostfile) is None
    assert mpi_operator.hostfile_hosts({}, runner_hosts.parse_hostfile) is None

"""Jobs started the way torchrun, Kubeflow Trainer's plain runtime or SageMaker start
them: plain processes with MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE and no launcher. hvd.init() meets at MASTER_ADDR:MASTER_PORT over Gloo
(rank 0 serves the authenticated rendezvous); a process that cannot join its job fails
with an error that says why instead of training as a job of one.
"""

import contextlib
import json
import os
import secrets
import socket
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
from jobrunner import PYTHON, Job, base_env  # noqa: E402

WORKER = os.path.join(HERE, "workers", "engine_checks.py")
TIMEOUT = 150
ERROR_TYPE = "tf_hvd.scheduler.job.SchedulerEnvError"


def _free_port():
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(rank, size, port, secret, local_size=None, **extra):
    local_size = size if local_size is None else local_size
    env = base_env({
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
        "WORLD_SIZE": str(size), "LOCAL_RANK": str(rank % local_size),
        "LOCAL_WORLD_SIZE": str(local_size), "HOROVOD_START_TIMEOUT": "20",
    })
    for name in [n for n in env if n.startswith("SLURM_")]:
        del env[name]
    if secret is not None:
        env["HOROVOD_GLOO_RENDEZVOUS_SECRET"] = secret
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _run_ranks(envs, timeout=TIMEOUT):
    """Start one worker per environment at once; their JobResults in rank order."""
    jobs = [Job([PYTHON, WORKER], env=env) for env in envs]
    try:
        return [job.wait(timeout) for job in jobs]
    finally:
        for job in jobs:
            job.kill()


def _result(res):
    for line in res.output.splitlines():
        if line.startswith("ENGINE_RESULT "):
            return json.loads(line[len("ENGINE_RESULT "):])
    raise AssertionError("no result line:\n" + res.describe())


def _error(res):
    assert res.returncode == 3 and not res.timed_out, res.describe()
    for line in res.output.splitlines():
        if line.startswith("ENGINE_ERROR "):
            return line[len("ENGINE_ERROR "):]
    raise AssertionError("no error line:\n" + res.describe())


@pytest.mark.parametrize("size,local_size", [(2, 2), (3, 1)])
def test_ranks_meet_at_master_and_sum_exactly(size, local_size):
    port, secret = _free_port(), secrets.token_hex(32)
    results = _run_ranks([_env(r, size, port, secret, local_size) for r in range(size)])
    for rank, res in enumerate(results):
        assert res.ok, res.describe()
        got = _result(res)
        assert got["rank"] == rank and got["size"] == size, got
        assert got["local_rank"] == rank % local_size and got["local_size"] == local_size
        assert got["cross_size"] == size // local_size
        assert got["cross_rank"] == rank // local_size
        assert got["gloo"] and not got["mpi"]
        assert got["sum_exact"] and got["gathered"] == list(range(size))
        assert got["broadcast"] == [7.5]
        assert secret not in res.output  # never printed


def test_secret_file_when_no_secret_in_environment(tmp_path):
    """No secret in the environment: the ranks share one made in TF_HVD_SECRET_FILE
    (created 0600 by whichever rank came first)."""
    port, path = _free_port(), str(tmp_path / "tfhvd" / "secret")
    results = _run_ranks([_env(r, 2, port, None, TF_HVD_SECRET_FILE=path) for r in range(2)])
    for res in results:
        assert res.ok, res.describe()
        assert _result(res)["sum_exact"]
    assert oct(os.stat(path).st_mode & 0o777) == oct(0o600)
    assert len(open(path).read().strip()) == 64


def test_secret_file_readable_by_others_is_refused(tmp_path):
    path = tmp_path / "secret"
    path.write_text(secrets.token_hex(32))
    os.chmod(path, 0o644)
    (res,) = _run_ranks([_env(1, 2, _free_port(), None, TF_HVD_SECRET_FILE=str(path))])
    err = _error(res)
    assert err.startswith("tf_hvd.job.secret.SecretError: "), err
    assert "is readable by other users (mode 644)" in err and "chmod 600" in err, err


def test_missing_secret_is_an_error():
    """No secret in the environment and no secret file can be made there."""
    (res,) = _run_ranks([_env(1, 2, _free_port(), None,
                              TF_HVD_SECRET_FILE="/dev/null/tf_hvd/secret")])
    err = _error(res)
    assert err.startswith("tf_hvd.job.secret.SecretError: no rendezvous secret: "
                          "HOROVOD_GLOO_RENDEZVOUS_SECRET is not set and the secret file "
                          "/dev/null/tf_hvd/secret can be neither read nor created (Not a "
                          "directory); give every rank the same secret in "
                          "HOROVOD_GLOO_RENDEZVOUS_SECRET or in a file named by "
                          "TF_HVD_SECRET_FILE"), err


def test_unreachable_master_is_an_error():
    port = _free_port()
    (res,) = _run_ranks([_env(1, 2, port, secrets.token_hex(32), HOROVOD_START_TIMEOUT=2)])
    err = _error(res)
    assert err.startswith(ERROR_TYPE + ": torchrun: rank 1 cannot reach rank 0's rendezvous "
                          "at MASTER_ADDR:MASTER_PORT = 127.0.0.1:%d within the start "
                          "time-out (Connection refused)" % port), err


def test_mismatched_world_size_fails_every_rank():
    port, secret = _free_port(), secrets.token_hex(32)
    results = _run_ranks([_env(0, 2, port, secret), _env(1, 3, port, secret)])
    rank0, rank1 = (_error(res) for res in results)
    assert rank1.startswith(ERROR_TYPE + ": torchrun: this rank 1 was started for a job of 3 "
                            "processes but rank 0 (on "), rank1
    assert rank1.endswith(") for one of 2; every rank must get the same job size"), rank1
    assert rank0.startswith(ERROR_TYPE + ": torchrun: this rank 0 was started for a job of 2 "
                            "processes but rank 1 (on "), rank0


def test_wrong_secret_is_refused():
    port = _free_port()
    results = _run_ranks([_env(0, 2, port, secrets.token_hex(32), HOROVOD_START_TIMEOUT=8),
                          _env(1, 2, port, secrets.token_hex(32))])
    rank1 = _error(results[1])
    assert rank1.startswith(ERROR_TYPE + ": torchrun: rank 0's rendezvous at 127.0.0.1:%d "
                            "refused rank 1 (HTTP 403: wrong signature" % port), rank1
    rank0 = _error(results[0])
    assert "rank(s) 1 did not check in at this rank 0's rendezvous" in rank0, rank0


def test_rank_variables_without_master_do_not_train_alone():
    env = _env(1, 2, 1, secrets.token_hex(32))
    del env["MASTER_ADDR"], env["MASTER_PORT"]
    (res,) = _run_ranks([env])
    assert _error(res) == (
        ERROR_TYPE + ": torchrun-style environment (RANK/WORLD_SIZE): this process is rank 1 "
        "of 2 but MASTER_ADDR and MASTER_PORT are not set, so it cannot meet the other ranks "
        "(it will not train alone); set MASTER_ADDR to rank 0's host and MASTER_PORT to a "
        "free port on it, the same on every rank")

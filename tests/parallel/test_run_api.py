"""tf_hvd.runner.run (horovod.run): a function runs on every rank, the results come
back in rank order, on Gloo and on MPI; a failing rank fails the call, named as every
launcher names it (a raising, a killed and a frozen rank: rank_faults.py)."""

import os
import re
import sys

import pytest

import tf_hvd
import tf_hvd.runner
from jobrunner import base_env, mpiexec_path
from rank_faults import FIRST_LINES, fail_rank_one
from tf_hvd.exceptions import HorovodInternalError


def collective_step(scale, offset=0.0):
    """Needs TensorFlow: init, one allreduce, facts about the transport."""
    import tensorflow as tf
    import tf_hvd as hvd
    hvd.init()
    total = hvd.allreduce(tf.constant([float(hvd.rank() + 1)]), op=hvd.Sum, name="run_api")
    return {"rank": hvd.rank(), "size": hvd.size(), "sum": float(total.numpy()[0]) * scale +
            offset, "mpi": hvd.mpi_enabled(), "gloo": hvd.gloo_enabled(),
            "mpi_threads": hvd.mpi_threads_supported() if hvd.mpi_enabled() else None}


@pytest.fixture
def job_environment(monkeypatch):
    """The ranks inherit this process's environment: make it a clean job's."""
    for name in list(os.environ):
        if name.startswith(("HOROVOD_", "PMI_", "PMIX_", "OMPI_", "HYDRA_")):
            monkeypatch.delenv(name)
    for name, value in base_env().items():
        if name.startswith(("TF_", "OMP_", "PYTHON")):
            monkeypatch.setenv(name, value)
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep +
                       os.environ.get("PATH", ""))
    return monkeypatch


def test_run_returns_each_ranks_result_gloo_and_mpi(job_environment):
    assert tf_hvd.run is tf_hvd.runner.run  # horovod.run's place
    with pytest.warns(DeprecationWarning, match="np is deprecated"):  # Horovod's old name
        got = tf_hvd.runner.run(collective_step, args=(10.0,), kwargs={"offset": 0.5}, np=2,
                                use_gloo=True)
    assert [r["rank"] for r in got] == [0, 1]
    assert all(r["size"] == 2 and r["sum"] == 30.5 and r["gloo"] for r in got), got
    if mpiexec_path() is None:
        pytest.skip("no mpiexec")
    got = tf_hvd.runner.run(collective_step, args=(1.0,), num_proc=2, use_mpi=True)
    assert [(r["rank"], r["sum"], r["mpi"]) for r in got] == [(0, 3.0, True), (1, 3.0, True)]
    # MPI runs with MPI_THREAD_MULTIPLE unless HOROVOD_MPI_THREADS_DISABLE=1.
    assert all(r["mpi_threads"] is True for r in got), got
    job_environment.setenv("HOROVOD_MPI_THREADS_DISABLE", "1")
    got = tf_hvd.runner.run(collective_step, args=(1.0,), num_proc=1, use_mpi=True)
    assert got[0]["mpi_threads"] is False and got[0]["sum"] == 1.0, got


def test_run_closure_and_failure(job_environment, capfd):
    base = 7

    def plain(x):  # a closure: needs cloudpickle
        rank = int(os.environ["HOROVOD_RANK"])
        if x == "fail" and rank == 1:
            raise ValueError("rank one fails on purpose")
        return (rank, base, x)

    assert tf_hvd.runner.run(plain, args=("a",), num_proc=3) == [
        (0, 7, "a"), (1, 7, "a"), (2, 7, "a")]
    with pytest.raises(ValueError, match=r"^rank 1 \(on localhost, pid \d+\) raised "
                       r"ValueError: rank one fails on purpose$") as raised:
        tf_hvd.runner.run(plain, args=("fail",), num_proc=2)
    assert "rank one fails on purpose" in str(raised.value.__cause__)  # its traceback
    err = capfd.readouterr().err
    assert "rank one fails on purpose" in err and "tfhvdrun: rank 1" in err, err[-2000:]
    with pytest.raises(ValueError, match="use_gloo or use_mpi"):
        tf_hvd.runner.run(plain, use_gloo=True, use_mpi=True)


@pytest.mark.parametrize("how", ["raise", "kill", "freeze"])
def test_the_root_cause_is_named_first_with_host_and_pid(job_environment, capfd, how):
    job_environment.setenv("HOROVOD_PEER_TIMEOUT_SECONDS", "4")
    with pytest.raises(KeyError if how == "raise" else HorovodInternalError) as raised:
        tf_hvd.runner.run(fail_rank_one, args=(how,), num_proc=2)
    pid = re.search(r"^\[1\]<stdout>:pid (\d+)$", capfd.readouterr().out, re.M).group(1)
    first = str(raised.value.args[0]).splitlines()[0]
    assert re.match(r"^rank 1 \(on localhost, pid %s\) %s(; rank 0 stopped in consequence)?$"
                    % (pid, FIRST_LINES[how]), first), first
    print(type(raised.value).__name__, first)

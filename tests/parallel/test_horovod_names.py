"""Code written for Horovod runs unchanged with the opt-in names (tf-hvd-horovod): a
worker importing only horovod.* paths, started by the wheel's `horovodrun` from a venv
where pip installed it, gets exact results on every rank (np=3 on Gloo, np=2 on MPI)."""

import os
import sys

import pytest

from collective_launch import WORKERS, assert_job_ok
from horovod_names_venv import build_wheel, make_venv
from jobrunner import job_env, run


@pytest.fixture(scope="module")
def venv_bin(tmp_path_factory):
    wheel = build_wheel(tmp_path_factory.mktemp("wheel"))
    return make_venv(tmp_path_factory.mktemp("venv") / "v", wheel)


@pytest.mark.parametrize("np_, transport", [(3, "gloo"), (2, "mpi")])
def test_horovod_script_unchanged_under_horovodrun(venv_bin, tmp_path, np_, transport):
    result_dir = str(tmp_path / "results")
    os.makedirs(result_dir)
    env = job_env()
    env["PATH"] = venv_bin + os.pathsep + env["PATH"]  # `python` is the venv's, as a user's
    # The stacked venv shares the test venv's packages but not its prefix, where the
    # mpich wheel put libmpi (a user's one venv has both).
    env["HOROVOD_MPI_LIBRARY"] = os.path.join(sys.prefix, "lib", "libmpi.so.12")
    cmd = [os.path.join(venv_bin, "horovodrun"), "-np", str(np_)]
    cmd += ["--mpi"] if transport == "mpi" else []
    cmd += ["python", os.path.join(WORKERS, "horovod_names_checks.py"), "--np", str(np_),
            "--transport", transport, "--result-dir", result_dir]
    res = run(cmd, 240, env=env, log_path=os.path.join(result_dir, "output.log"))
    assert_job_ok(np_, result_dir, res.returncode, res.output, res.seconds, cmd)

"""Grouped allreduce negotiated as a group, and unnamed eager collectives that
stay in step (workers/groups_naming.py), under a hard time limit per job."""

import pytest

from collective_launch import assert_job_ok, run_job

TIMEOUT = 240


def _run(tmp_path, np_, transport, only, env=None):
    result_dir = str(tmp_path / ("%s-np%d-%s" % (transport, np_, only)))
    code, output, seconds, cmd = run_job(np_, transport, "groups_naming.py", result_dir,
                                         args=["--only", only], env=env, timeout=TIMEOUT)
    checks = assert_job_ok(np_, result_dir, code, output, seconds, cmd, timeout=TIMEOUT)
    print("%d checks passed in %.1fs" % (checks, seconds))
    return output


@pytest.mark.parametrize("np_,transport", [(2, "gloo"), (3, "gloo"), (2, "mpi"), (3, "mpi")])
def test_grouped_allreduce_as_group(tmp_path, np_, transport):
    _run(tmp_path, np_, transport, "groups")


def test_grouped_allreduce_fusion_off(tmp_path):
    _run(tmp_path, 3, "gloo", "groups",
         env={"HOROVOD_FUSION_THRESHOLD": "0", "HOROVOD_CACHE_CAPACITY": "0"})


@pytest.mark.parametrize("transport", ["gloo", "mpi"])
def test_unnamed_eager_collectives_stay_in_step(tmp_path, transport):
    # A stall would be reported (and the job ended) long before the time limit.
    output = _run(tmp_path, 2, transport, "naming",
                  env={"HOROVOD_STALL_CHECK_TIME_SECONDS": "5",
                       "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "30"})
    assert "Stall detected" not in output

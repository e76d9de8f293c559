"""tf_hvd collectives inside XLA-compiled functions and Keras jit_compile=True
(workers/xla_checks.py): exact allreduce/grouped allreduce/allgather/broadcast,
the errors, Keras fit and a DistributedGradientTape loop equal to the same
training without XLA; one dense job per transport, under a hard time limit."""

import pytest

from collective_launch import assert_job_ok, run_job

TIMEOUT = 300


@pytest.mark.parametrize("transport", ["gloo", "mpi"])
def test_xla_collectives(tmp_path, transport):
    result_dir = str(tmp_path / transport)
    code, output, seconds, cmd = run_job(2, transport, "xla_checks.py", result_dir,
                                         timeout=TIMEOUT)
    checks = assert_job_ok(2, result_dir, code, output, seconds, cmd, timeout=TIMEOUT)
    print("%d checks passed in %.1fs" % (checks, seconds))

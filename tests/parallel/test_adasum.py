"""op=hvd.Adasum on CPU (workers/adasum_checks.py): against a numpy reference of
the Adasum formula at np=2 on Gloo and MPI, the error at np=3. The C++ tests
(tests/unit/cc/algorithms_test.cc) cover 4 and 8 ranks as threads."""

import pytest

from collective_launch import assert_job_ok, run_job

TIMEOUT = 240


@pytest.mark.parametrize("np_,transport", [(2, "gloo"), (2, "mpi"), (3, "gloo")])
def test_adasum(tmp_path, np_, transport):
    result_dir = str(tmp_path / ("%s-np%d" % (transport, np_)))
    code, output, seconds, cmd = run_job(np_, transport, "adasum_checks.py", result_dir,
                                         timeout=TIMEOUT)
    checks = assert_job_ok(np_, result_dir, code, output, seconds, cmd, timeout=TIMEOUT)
    print("%d checks passed in %.1fs" % (checks, seconds))

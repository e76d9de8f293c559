"""Process sets (workers/process_sets.py): exact collectives on two disjoint sets
and an overlapping one, a set that waits for a late member does not hold up
another, errors, training equivalence, static and dynamic registration; one
dense job per configuration, under a hard time limit."""

import pytest

from collective_launch import assert_job_ok, run_job

TIMEOUT = 300


# np=4 sends every allreduce through the ring over the members' links (no
# gather, no shared memory); the others take the default algorithms.
RING = {"HOROVOD_GLOO_DIRECT_MAX_BYTES": "0", "HOROVOD_SHM_ALLREDUCE": "0"}


@pytest.mark.parametrize("np_,transport,knobs", [(3, "gloo", {}), (4, "gloo", RING),
                                                 (3, "mpi", {})])
def test_process_sets(tmp_path, np_, transport, knobs):
    result_dir = str(tmp_path / ("%s-np%d" % (transport, np_)))
    env = {"HOROVOD_STALL_CHECK_TIME_SECONDS": "2"}
    env.update(knobs)
    code, output, seconds, cmd = run_job(np_, transport, "process_sets.py", result_dir,
                                         timeout=TIMEOUT, env=env)
    checks = assert_job_ok(np_, result_dir, code, output, seconds, cmd, timeout=TIMEOUT)
    print("%d checks passed in %.1fs" % (checks, seconds))
    # The coordinator of the set whose first rank came late names the set.
    assert ("Stall detected: process set 1 (ranks 0, 2): tensor 'stall.a' (allreduce)"
            in output), output[-3000:]
    assert "submitted by ranks [2] but not yet by ranks [0]" in output

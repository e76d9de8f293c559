"""Collective operations across processes, on both transports, at np=2 and np=3.

Each test starts one job (every rank checks hundreds of results in one process,
see workers/collectives_*.py) under a hard time limit:
* tf2:   eager and tf.function: every op x dtype x shape, gradients, IndexedSlices,
         join, barrier, broadcast_variables/objects, validation errors;
* graph: the same op cases built into a TF1 graph and run by a Session, plus
         TF1-only features (broadcast_global_variables, v1.gradients, feeds).
The knob variants rerun the tf2 worker with fusion or the response cache off;
the expected values are exact, so they must give identical results.
"""

import pytest

from collective_launch import assert_job_ok, run_job

TIMEOUT = 240

WORKER = {"tf2": "collectives_tf2.py", "graph": "collectives_graph.py"}


def _run(tmp_path, np_, transport, mode, env=None):
    result_dir = str(tmp_path / ("%s-np%d-%s" % (transport, np_, mode)))
    args = []
    for key, value in (env or {}).items():
        args += ["--expect-env", "%s=%s" % (key, value)]
    code, output, seconds, cmd = run_job(np_, transport, WORKER[mode], result_dir, args=args,
                                         env=env, timeout=TIMEOUT)
    checks = assert_job_ok(np_, result_dir, code, output, seconds, cmd, timeout=TIMEOUT)
    print("%d checks passed in %.1fs" % (checks, seconds))


@pytest.mark.parametrize("mode", ["tf2", "graph"])
@pytest.mark.parametrize("transport", ["gloo", "mpi"])
@pytest.mark.parametrize("np_", [2, 3])
def test_collectives(tmp_path, np_, transport, mode):
    _run(tmp_path, np_, transport, mode)


@pytest.mark.parametrize("np_,transport,knob", [
    (3, "gloo", "HOROVOD_FUSION_THRESHOLD"),
    (2, "mpi", "HOROVOD_FUSION_THRESHOLD"),
    (3, "gloo", "HOROVOD_CACHE_CAPACITY"),
    (2, "mpi", "HOROVOD_CACHE_CAPACITY"),
])
def test_collectives_knob_off(tmp_path, np_, transport, knob):
    # The environment reaches every rank through the launcher (the worker checks it).
    _run(tmp_path, np_, transport, "tf2", env={knob: "0"})

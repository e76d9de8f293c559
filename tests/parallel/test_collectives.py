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


def _run(tmp_path, np_, transport, mode, env=None, only=None):
    result_dir = str(tmp_path / ("%s-np%d-%s" % (transport, np_, mode)))
    args = ["--only", only] if only else []
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


# Fusion, the response cache and the allreduce algorithm (gather, ring, shared
# memory) change how tensors
# travel, never the results.
KNOB_SECTIONS = "topology,cases eager,cases tf.function,repeated,paths,join,errors"


@pytest.mark.parametrize("np_,transport,knobs", [
    (3, "gloo", {"HOROVOD_FUSION_THRESHOLD": "0"}),
    (2, "gloo", {"HOROVOD_CACHE_CAPACITY": "0", "HOROVOD_TF_THREADS": "0",
                 "HOROVOD_SPIN_US": "0"}),
    (3, "mpi", {"HOROVOD_FUSION_THRESHOLD": "0", "HOROVOD_CACHE_CAPACITY": "0",
                "HOROVOD_SPIN_US": "0"}),
    # Gloo: every allreduce, however small, takes the ring over the own socket
    # mesh (the default links), then over Gloo's TCP pairs.
    (3, "gloo", {"HOROVOD_GLOO_DIRECT_MAX_BYTES": "0", "HOROVOD_SHM_ALLREDUCE": "0"}),
    (3, "gloo", {"HOROVOD_GLOO_LINKS": "pairs", "HOROVOD_GLOO_DIRECT_MAX_BYTES": "0",
                 "HOROVOD_SHM_ALLREDUCE": "0"}),
    # Every allreduce goes through shared memory, in blocks of one page (so
    # larger tensors take many blocks and every slot).
    (3, "gloo", {"HOROVOD_GLOO_DIRECT_MAX_BYTES": "0", "HOROVOD_SHM_MIN_BYTES": "0",
                 "HOROVOD_SHM_SLOT_BYTES": "4096"}),
    (2, "mpi", {"HOROVOD_SHM_MIN_BYTES": "0", "HOROVOD_SHM_SLOT_BYTES": "4096",
                "HOROVOD_CPU_BIND": "0"}),
    # MPI without shared memory: MPI_Allreduce and MPI's bit exchange in negotiation.
    (3, "mpi", {"HOROVOD_SHM_ALLREDUCE": "0"}),
], ids=["gloo-np3-fusion0", "gloo-np2-cache0-tfthreads0-spin0", "mpi-np3-fusion0-cache0-spin0", "gloo-np3-ring",
        "gloo-np3-pairs-ring", "gloo-np3-shm", "mpi-np2-shm-nobind", "mpi-np3-backend"])
def test_collectives_knobs(tmp_path, np_, transport, knobs):
    # The environment reaches every rank through the launcher (the worker checks it).
    _run(tmp_path, np_, transport, "tf2", env=knobs, only=KNOB_SECTIONS)

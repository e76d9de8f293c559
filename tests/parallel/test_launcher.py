"""The launcher seen from inside the ranks (no TensorFlow needed).

Two halves in one file:

* rank tests run on every rank under tfhvdrun: they check the rank environment and
  that all ranks meet through the launcher's rendezvous store (Gloo mode), or that
  the MPI environment works through the rank wrapper (--mpi);
* driver tests, when this file is run by plain pytest, start
  ``python -m tf_hvd.runner -np N python -m pytest <this file>`` at np=2 and 3 (Gloo)
  and np=2 (MPI) and check that every rank passed.

So ``pytest tests/parallel/test_launcher.py`` is enough, and
``tfhvdrun -np 3 python -m pytest tests/parallel/test_launcher.py`` works too.
"""

import http.client
import os
import re
import sys
import time

import pytest

from jobrunner import SCRUB_PREFIXES, base_env, run, tfhvdrun_cmd

THIS = os.path.abspath(__file__)
REPO = os.path.dirname(os.path.dirname(os.path.dirname(THIS)))

UNDER_GLOO = "HOROVOD_RANK" in os.environ
UNDER_MPI = os.environ.get("HOROVOD_CONTROLLER") == "mpi" and "PMI_RANK" in os.environ
UNDER_LAUNCHER = UNDER_GLOO or UNDER_MPI

gloo_rank_test = pytest.mark.skipif(not UNDER_GLOO, reason="runs on ranks under tfhvdrun")
mpi_rank_test = pytest.mark.skipif(not UNDER_MPI, reason="runs on ranks under tfhvdrun --mpi")
driver_test = pytest.mark.skipif(UNDER_LAUNCHER, reason="starts the launcher itself")


# -- rank side: Gloo mode ------------------------------------------------------------------

def _env_int(name):
    return int(os.environ[name])


class _KV(object):
    """Signed requests with the job's secret (the server refuses anything else)."""

    def __init__(self):
        from tf_hvd.job.rendezvous import RendezvousClient
        self.conn = RendezvousClient.from_env(os.environ, timeout=30)

    def request(self, method, key, body=None):
        return self.conn.request(method, "/" + key, body or b"")

    def wait_get(self, key, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, body = self.request("GET", key)
            if status == 200:
                return body
            assert status == 404
            time.sleep(0.02)
        raise AssertionError("key %s never appeared" % key)

    def close(self):
        self.conn.close()


@gloo_rank_test
def test_rank_environment():
    rank, size = _env_int("HOROVOD_RANK"), _env_int("HOROVOD_SIZE")
    assert 0 <= rank < size
    assert _env_int("HOROVOD_LOCAL_SIZE") == size  # all local
    assert _env_int("HOROVOD_LOCAL_RANK") == rank
    assert _env_int("HOROVOD_CROSS_RANK") == 0 and _env_int("HOROVOD_CROSS_SIZE") == 1
    assert os.environ["HOROVOD_CONTROLLER"] == "gloo"
    assert os.environ["HOROVOD_HOSTNAME"] == "127.0.0.1"
    assert os.environ["HOROVOD_GLOO_RENDEZVOUS_ADDR"] == "127.0.0.1"


@gloo_rank_test
def test_unsigned_requests_are_refused():
    rank = _env_int("HOROVOD_RANK")
    conn = http.client.HTTPConnection(os.environ["HOROVOD_GLOO_RENDEZVOUS_ADDR"],
                                      _env_int("HOROVOD_GLOO_RENDEZVOUS_PORT"), timeout=30)
    try:
        conn.request("PUT", "/unsigned/rank%d" % rank, body=b"x")
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 403
    finally:
        conn.close()
    kv = _KV()
    try:
        assert kv.request("GET", "unsigned/rank%d" % rank)[0] == 404
    finally:
        kv.close()


@gloo_rank_test
def test_ranks_exchange_through_rendezvous():
    rank, size = _env_int("HOROVOD_RANK"), _env_int("HOROVOD_SIZE")
    kv = _KV()
    try:
        blob = bytes([rank]) * 1000 + b"\x00\r\n" + b"rank%d" % rank
        assert kv.request("PUT", "exchange/rank%d" % rank, blob)[0] == 200
        for peer in range(size):
            expected = bytes([peer]) * 1000 + b"\x00\r\n" + b"rank%d" % peer
            assert kv.wait_get("exchange/rank%d" % peer) == expected
        # Everyone has read everything: now each rank may remove its own key.
        assert kv.request("PUT", "exchange_done/rank%d" % rank, b"1")[0] == 200
        for peer in range(size):
            kv.wait_get("exchange_done/rank%d" % peer)
        assert kv.request("DELETE", "exchange/rank%d" % rank)[0] == 200
        assert kv.request("GET", "exchange/rank%d" % rank)[0] == 404
    finally:
        kv.close()


# -- rank side: MPI mode -------------------------------------------------------------------

@mpi_rank_test
def test_mpi_rank_environment():
    rank, size = _env_int("PMI_RANK"), _env_int("PMI_SIZE")
    assert 0 <= rank < size
    assert "HOROVOD_RANK" not in os.environ


@mpi_rank_test
def test_mpi_works_through_the_wrapper():
    MPI = pytest.importorskip("mpi4py.MPI")
    comm = MPI.COMM_WORLD
    assert comm.Get_rank() == _env_int("PMI_RANK")
    assert comm.Get_size() == _env_int("PMI_SIZE")
    n = comm.Get_size()
    assert comm.allreduce(comm.Get_rank() + 1) == n * (n + 1) // 2


# -- driver side -------------------------------------------------------------------------------

def _run_under_launcher(extra_args, np_):
    env = base_env(scrub=SCRUB_PREFIXES + ("PYTEST_",))
    argv = (tfhvdrun_cmd(np_, launcher_args=extra_args) +
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", THIS])
    return run(argv, 300, env=env, cwd=REPO, merge_stderr=False).check_finished()


def _check_all_ranks_passed(proc, np_, expected_passed):
    out = proc.stdout.decode("utf-8", "replace")
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 0, out + err
    for rank in range(np_):
        summary = [l for l in out.splitlines()
                   if l.startswith("[%d]<stdout>:" % rank) and " passed" in l]
        assert summary, "rank %d printed no pytest summary:\n%s\n%s" % (rank, out, err)
        passed = int(re.search(r"(\d+) passed", summary[-1]).group(1))
        assert passed == expected_passed, summary[-1]
        assert "failed" not in summary[-1] and "error" not in summary[-1]


@driver_test
@pytest.mark.parametrize("np_", [2, 3])
def test_gloo_ranks(np_):
    _check_all_ranks_passed(_run_under_launcher([], np_), np_, expected_passed=3)


@driver_test
def test_mpi_ranks():
    from tf_hvd.runner.modes import mpiexec as mpi
    if mpi.find_mpiexec() is None:
        pytest.skip("no mpiexec")
    _check_all_ranks_passed(_run_under_launcher(["--mpi"], 2), 2, expected_passed=2)

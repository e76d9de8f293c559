"""The ranks' C++ rendezvous client (cc/common/gloo/http_store.cc) against the
launcher's Python server: its HMAC-SHA256 signatures must be accepted by Python's
``hmac`` module, a wrong or missing secret must fail fast with a message saying so,
a reply that is not signed with the job's secret must be rejected, and a start-up
timeout must name the ranks that did not check in.

Each case runs ``hvd.init()`` in a fresh single process whose environment looks like
a rank started by tfhvdrun (no launcher involved, so nothing else talks to the server).
"""

import os
import socket
import sys
import threading
import time

import pytest

from jobrunner import clean_env, run
from tf_hvd.job import auth
from tf_hvd.job.rendezvous import RendezvousServer

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = sys.executable

pytestmark = pytest.mark.skipif(
    not os.path.exists(os.path.join(REPO, "tf_hvd", "_hvd.so")),
    reason="tf_hvd/_hvd.so is not built")

INIT = """
import sys, time
import tf_hvd as hvd
hvd.init  # imports TensorFlow: not part of the time measured
start = time.monotonic()
try:
    hvd.init()
except Exception as e:
    print("INIT FAILED after %.1f s: %s" % (time.monotonic() - start, e))
    sys.exit(3)
print("INIT OK", hvd.rank(), hvd.size())
hvd.shutdown()
"""


def _run_rank(port, secret, rank=0, size=1, timeout_s=3):
    env = clean_env({
        "PYTHONPATH": REPO, "TF_CPP_MIN_LOG_LEVEL": "3",
        "HOROVOD_RANK": str(rank), "HOROVOD_SIZE": str(size),
        "HOROVOD_LOCAL_RANK": str(rank), "HOROVOD_LOCAL_SIZE": str(size),
        "HOROVOD_CROSS_RANK": "0", "HOROVOD_CROSS_SIZE": "1",
        "HOROVOD_HOSTNAME": "127.0.0.1", "HOROVOD_CONTROLLER": "gloo",
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": "127.0.0.1",
        "HOROVOD_GLOO_RENDEZVOUS_PORT": str(port),
        "HOROVOD_GLOO_TIMEOUT_SECONDS": str(timeout_s),
    })
    if secret is not None:
        env[auth.SECRET_ENV] = secret
    res = run([PY, "-c", INIT], 120, env=env, cwd=REPO).check_finished()
    return res.returncode, res.output


def _failure_seconds(out):
    line = [l for l in out.splitlines() if l.startswith("INIT FAILED after")][0]
    return float(line.split()[3])


def test_signed_requests_from_cpp_are_accepted():
    with RendezvousServer("127.0.0.1") as server:
        code, out = _run_rank(server.port, server.secret)
        assert code == 0, out
        assert "INIT OK 0 1" in out
        # the C++ client really stored its address through signed PUTs
        assert "gloo/global/0" in server.store.keys()
        assert server.refusals == 0


def test_missing_secret_fails_fast_and_stores_nothing():
    with RendezvousServer("127.0.0.1") as server:
        code, out = _run_rank(server.port, None, timeout_s=60)
        assert code == 3, out
        assert "HTTP 403" in out and auth.SECRET_ENV + " is not set" in out
        assert _failure_seconds(out) < 10  # not after the 60 s timeout
        assert server.store.keys() == [] and server.refusals >= 1


def test_wrong_secret_fails_fast_and_stores_nothing():
    with RendezvousServer("127.0.0.1") as server:
        wrong = auth.new_secret()
        code, out = _run_rank(server.port, wrong, timeout_s=60)
        assert code == 3, out
        assert "HTTP 403" in out and "not the job's secret" in out
        assert wrong not in out and server.secret not in out
        assert _failure_seconds(out) < 10
        assert server.store.keys() == []


class _Impostor(threading.Thread):
    """Says 200 to everything, with a signature made without the job's secret."""

    def __init__(self):
        threading.Thread.__init__(self, daemon=True)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]

    def run(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            try:
                conn.settimeout(5)
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                conn.sendall(self.reply())
            except OSError:
                pass
            finally:
                conn.close()

    def reply(self):
        """What every request gets: a reply signed with another secret."""
        sig = auth.response_signature(auth.new_secret(), 200, "x" * 16, b"")
        return ("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Tfhvd-Signature: "
                "%s\r\nConnection: close\r\n\r\n" % sig).encode()


def test_reply_not_signed_by_the_job_is_rejected():
    impostor = _Impostor()
    impostor.start()
    try:
        code, out = _run_rank(impostor.port, auth.new_secret(), timeout_s=60)
    finally:
        impostor.sock.close()
    assert code == 3, out
    assert "not signed with the job's secret" in out
    assert _failure_seconds(out) < 10


def test_start_timeout_names_the_ranks_that_did_not_check_in():
    with RendezvousServer("127.0.0.1") as server:
        start = time.monotonic()
        code, out = _run_rank(server.port, server.secret, rank=0, size=3, timeout_s=3)
        assert code == 3, out
        assert "rank(s) [1,2] of 3 did not check in (ranks [0] did)" in out
        assert "--start-timeout" in out
        assert 2.5 < _failure_seconds(out) < 15
        assert time.monotonic() - start < 60


def test_unreachable_server():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    code, out = _run_rank(port, auth.new_secret(), timeout_s=2)
    assert code == 3, out
    assert "cannot reach the rendezvous server 127.0.0.1:%d" % port in out
    assert "(cannot connect: Connection refused)" in out


class _Flood(_Impostor):
    """Answers every request with a reply announcing more than 64 MiB of body."""

    def reply(self):
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (65 << 20) + b"x" * 65536


def test_reply_larger_than_64_mib_is_refused():
    flood = _Flood()
    flood.start()
    try:
        code, out = _run_rank(flood.port, auth.new_secret(), timeout_s=60)
    finally:
        flood.sock.close()
    assert code == 3, out
    assert ("rendezvous server 127.0.0.1:%d sent a reply larger than %d bytes for key "
            % (flood.port, 64 << 20)) in out
    assert "it is not tf_hvd's rendezvous server" in out
    assert _failure_seconds(out) < 10


def test_server_that_never_replies_is_given_up_after_30_s():
    """Connected, request sent, no reply: each read waits 30 s, then the client gives up."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)  # accepted by the kernel, never read nor answered
    port = silent.getsockname()[1]
    try:
        code, out = _run_rank(port, auth.new_secret(), timeout_s=2)
    finally:
        silent.close()
    assert code == 3, out
    assert ("cannot reach the rendezvous server 127.0.0.1:%d (no complete reply within 30 s)"
            % port) in out
    assert 29 < _failure_seconds(out) < 60

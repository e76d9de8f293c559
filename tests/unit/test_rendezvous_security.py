"""Security of the rendezvous server: only requests signed with the job's secret.

Everything here talks to a real server over sockets "from a separate client": the
test process, which knows (or pretends not to know) the secret. Refused requests must
get 403 (or 413/414 for oversized ones) and leave the store exactly as it was.
"""

import http.client
import os
import shlex
import socket
import sys
import textwrap
import threading
import time

import pytest

from jobrunner import Job, clean_env, run
from tf_hvd.job import auth, network, rank_env
from tf_hvd.runner.command_line import plan as plan_mod, parser as cli, launch_config
from tf_hvd.runner.processes import ssh
from tf_hvd.job.rendezvous import RendezvousClient, RendezvousError, RendezvousServer

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = sys.executable


@pytest.fixture
def refusals():
    return []


@pytest.fixture
def server(refusals):
    s = RendezvousServer("127.0.0.1", on_refusal=lambda *a: refusals.append(a))
    s.start()
    yield s
    s.stop()


def _raw(server, method, path, body=b"", headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read(), resp
    finally:
        conn.close()


def _client(server, secret=None):
    return RendezvousClient("127.0.0.1", server.port, secret or server.secret, timeout=10)


def _snapshot(server):
    return {k: server.store.get(k) for k in server.store.keys()}


def test_secret_shape():
    a, b = auth.new_secret(), auth.new_secret()
    assert a != b and len(a) == 64 and int(a, 16) >= 0


def test_signed_client_round_trip(server):
    with _client(server) as c:
        assert c.get("s/k") is None
        assert c.put("s/k", b"\x00value\r\n") == 200
        assert c.get("s/k") == b"\x00value\r\n"
        assert c.delete("s/k") == 200
        assert c.get("s/k") is None


def test_unsigned_requests_get_403_and_change_nothing(server, refusals):
    with _client(server) as c:
        c.put("job/rank0", b"real")
    before = _snapshot(server)
    for method in ("PUT", "POST", "GET", "DELETE", "HEAD"):
        status, body, _ = _raw(server, method, "/job/rank0", b"evil" if method in (
            "PUT", "POST") else b"")
        assert status == 403, method
        if method != "HEAD":
            assert b"job/rank0" not in body and b"real" not in body  # nothing leaks
    assert _snapshot(server) == before
    assert server.refusals == 5
    assert [r[3] for r in refusals] == [True, False, False, False, False]
    assert refusals[0][0][0] == "127.0.0.1" and refusals[0][1] == 403


def test_wrong_secret_gets_403(server):
    with _client(server, secret=auth.new_secret()) as c:
        status, body = c.request("PUT", "/job/x", b"evil")
        assert status == 403 and b"wrong signature" in body
        status, _ = c.request("GET", "/job/x")
        assert status == 403
    assert server.store.keys() == []


@pytest.mark.parametrize("tamper", ["body", "path", "method", "timestamp", "nonce",
                                    "signature", "query"])
def test_tampered_requests_are_refused(server, tamper):
    with _client(server) as c:
        c.put("job/k", b"original")
    before = _snapshot(server)
    method, path, body = "PUT", "/job/k", b"signed-body"
    headers = auth.sign_request(server.secret, method, path, body)
    if tamper == "body":
        body = b"other-body!"
    elif tamper == "path":
        path = "/job/other"
    elif tamper == "method":
        method, body = "DELETE", b""
        headers = auth.sign_request(server.secret, "GET", path, b"")
    elif tamper == "timestamp":
        headers[auth.HEADER_TIMESTAMP] = str(int(headers[auth.HEADER_TIMESTAMP]) + 1)
    elif tamper == "nonce":
        nonce = headers[auth.HEADER_NONCE]
        headers[auth.HEADER_NONCE] = nonce[:-1] + ("1" if nonce[-1] == "0" else "0")
    elif tamper == "signature":
        sig = headers[auth.HEADER_SIGNATURE]
        headers[auth.HEADER_SIGNATURE] = ("0" if sig[0] != "0" else "1") + sig[1:]
    elif tamper == "query":
        path = "/job/k?x=1"
    status, _, _ = _raw(server, method, path, body, headers)
    assert status == 403
    assert _snapshot(server) == before


def test_replayed_request_is_refused(server):
    path = "/job/k"
    old = auth.sign_request(server.secret, "PUT", path, b"old")
    assert _raw(server, "PUT", path, b"old", old)[0] == 200
    with _client(server) as c:
        c.put("job/k", b"new")
    # An eavesdropper re-sends the earlier request to roll the value back: refused.
    status, body, _ = _raw(server, "PUT", path, b"old", old)
    assert status == 403 and b"replayed" in body
    assert server.store.get("job/k") == b"new"


@pytest.mark.parametrize("skew", [-400, 400])
def test_stale_or_future_timestamp_is_refused(server, skew):
    headers = auth.sign_request(server.secret, "PUT", "/job/t", b"v",
                                timestamp=time.time() + skew)
    status, body, _ = _raw(server, "PUT", "/job/t", b"v", headers)
    assert status == 403 and b"clock" in body
    assert server.store.keys() == []


@pytest.mark.parametrize("bad", [
    {auth.HEADER_TIMESTAMP: "soon"},
    {auth.HEADER_NONCE: "short"},
    {auth.HEADER_NONCE: "has space in it"},
    {auth.HEADER_SIGNATURE: "XYZ"},
    {auth.HEADER_SIGNATURE: "A" * 64},
])
def test_malformed_auth_headers(server, bad):
    headers = auth.sign_request(server.secret, "PUT", "/job/m", b"v")
    headers.update(bad)
    assert _raw(server, "PUT", "/job/m", b"v", headers)[0] == 403
    assert server.store.keys() == []


def test_replies_are_signed_and_checked(server):
    with _client(server) as c:
        c.put("job/r", b"v")
    headers = auth.sign_request(server.secret, "GET", "/job/r")
    status, body, resp = _raw(server, "GET", "/job/r", b"", headers)
    assert status == 200 and body == b"v"
    assert resp.getheader(auth.HEADER_SIGNATURE) == auth.response_signature(
        server.secret, 200, headers[auth.HEADER_NONCE], b"v")


def test_client_rejects_a_reply_signed_with_another_secret():
    """A server that does not hold the job's secret cannot answer the job's ranks."""
    impostor_secret = auth.new_secret()
    with RendezvousServer("127.0.0.1", secret=impostor_secret) as impostor:
        # the impostor accepts the request only if it is signed with its own secret;
        # a client holding the job's secret gets 403 (refusal), never a fake 200
        with RendezvousClient("127.0.0.1", impostor.port, auth.new_secret()) as c:
            assert c.request("GET", "/gloo/global/0")[0] == 403

    class Liar(threading.Thread):
        """Answers every request with 200 and an unsigned body."""

        def __init__(self):
            threading.Thread.__init__(self, daemon=True)
            self.sock = socket.socket()
            self.sock.bind(("127.0.0.1", 0))
            self.sock.listen(4)

        def run(self):
            while True:
                try:
                    conn, _ = self.sock.accept()
                except OSError:
                    return
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n"
                             b"X-Tfhvd-Signature: " + b"0" * 64 + b"\r\n\r\nfake")
                conn.close()

    liar = Liar()
    liar.start()
    try:
        with RendezvousClient("127.0.0.1", liar.sock.getsockname()[1],
                              auth.new_secret()) as c:
            with pytest.raises(RendezvousError, match="not signed"):
                c.get("gloo/global/0")
    finally:
        liar.sock.close()


# -- bounded sizes and connections ------------------------------------------------------

def test_body_over_the_limit_is_refused_unread(refusals):
    with RendezvousServer("127.0.0.1", max_body=1000,
                          on_refusal=lambda *a: refusals.append(a)) as s:
        body = b"x" * 1001
        headers = auth.sign_request(s.secret, "PUT", "/big/k", body)
        status, reply, _ = _raw(s, "PUT", "/big/k", body, headers)
        assert status == 413 and b"larger than 1000" in reply
        # a huge announced length is refused before any byte of it is read
        sock = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        head = "".join("%s: %s\r\n" % kv for kv in
                       auth.sign_request(s.secret, "PUT", "/big/k", b"").items())
        sock.sendall(("PUT /big/k HTTP/1.1\r\nHost: a\r\n%sContent-Length: %d\r\n\r\n"
                      % (head, 1 << 40)).encode())
        answer = sock.recv(4096)
        sock.close()
        assert answer.startswith(b"HTTP/1.1 413")
        # chunked bodies are bounded too
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
        chunks = iter([b"y" * 600, b"y" * 600])
        conn.request("PUT", "/big/c", body=chunks, encode_chunked=True,
                     headers=auth.sign_request(s.secret, "PUT", "/big/c", b"y" * 1200))
        assert conn.getresponse().status == 413
        conn.close()
        assert s.store.keys() == []
        with _client(s) as c:  # still serving
            assert c.put("big/ok", b"x" * 1000) == 200


def test_long_request_target_is_refused(server):
    path = "/k/" + "a" * 5000
    status, _, _ = _raw(server, "PUT", path, b"v",
                        auth.sign_request(server.secret, "PUT", path, b"v"))
    assert status == 414
    assert server.store.keys() == []


def test_store_total_is_bounded():
    with RendezvousServer("127.0.0.1", max_total=100) as s, _client(s) as c:
        assert c.put("t/a", b"x" * 60) == 200
        assert c.put("t/b", b"x" * 60) == 507
        assert c.put("t/a", b"x" * 90) == 200  # replacing counts the difference
        c.delete("t/a")
        assert c.put("t/b", b"x" * 100) == 200
        assert s.store.total_bytes() == 100


def test_connection_limit_and_idle_timeout():
    with RendezvousServer("127.0.0.1", max_connections=2, idle_timeout=1.0) as s:
        held = [socket.create_connection(("127.0.0.1", s.port), timeout=10) for _ in range(2)]
        time.sleep(0.3)
        extra = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        assert extra.recv(100) == b""  # closed at once: the limit is reached
        extra.close()
        # idle connections are dropped after the idle timeout, freeing their slots
        for sock in held:
            sock.settimeout(5)
            assert sock.recv(100) == b""
            sock.close()
        time.sleep(0.2)
        with _client(s) as c:
            assert c.put("after/idle", b"1") == 200


# -- what the launcher does with the secret ---------------------------------------------

def _launch(argv, timeout=60):
    """``python -m tf_hvd.runner argv`` to its end (stdout/stderr apart, as bytes)."""
    return run([PY, "-m", "tf_hvd.runner"] + argv, timeout, env=clean_env(), cwd=REPO,
               merge_stderr=False).check_finished()


def _script(tmp_path, body):
    path = tmp_path / "rank.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


def test_ranks_get_the_job_secret_and_it_is_never_printed(tmp_path):
    script = _script(tmp_path, """
        import os, sys
        from tf_hvd.job.rendezvous import RendezvousClient
        secret = os.environ["HOROVOD_GLOO_RENDEZVOUS_SECRET"]
        r = os.environ["HOROVOD_RANK"]
        with open(os.path.join(sys.argv[1], "secret.%s" % r), "w") as f:
            f.write(secret)
        with open(os.path.join(sys.argv[1], "port"), "w") as f:
            f.write(os.environ["HOROVOD_GLOO_RENDEZVOUS_PORT"])
        c = RendezvousClient.from_env(os.environ)
        assert c.put("t/rank" + r, b"ok") == 200
        print("my secret is", secret)            # the launcher masks it
        print("env:", dict(os.environ), file=sys.stderr)
    """)
    outs = []
    for _ in range(2):
        d = tmp_path / ("job%d" % len(outs))
        d.mkdir()
        proc = _launch(["-np", "2", "--verbose", "--output-filename", str(d / "logs"),
                        PY, script, str(d)])
        assert proc.returncode == 0, proc.stderr
        secrets_ = {(d / ("secret.%d" % r)).read_text() for r in range(2)}
        assert len(secrets_) == 1
        secret = secrets_.pop()
        assert len(secret) == 64
        out, err = proc.stdout.decode(), proc.stderr.decode()
        assert secret not in out and secret not in err
        assert "[0]<stdout>:my secret is ****" in out
        assert "HOROVOD_GLOO_RENDEZVOUS_SECRET" in err  # named, masked
        for r in range(2):
            for stream in ("stdout", "stderr"):
                assert secret not in (d / "logs" / ("rank.%d" % r) / stream).read_text()
        outs.append(secret)
    assert outs[0] != outs[1]  # a fresh secret per job


def test_outsider_is_refused_while_a_job_runs(tmp_path):
    script = _script(tmp_path, """
        import os, sys, time
        from tf_hvd.job.rendezvous import RendezvousClient
        d = sys.argv[1]
        c = RendezvousClient.from_env(os.environ)
        c.put("job/value", b"genuine")
        with open(os.path.join(d, "port.tmp"), "w") as f:
            f.write(os.environ["HOROVOD_GLOO_RENDEZVOUS_PORT"])
        os.rename(os.path.join(d, "port.tmp"), os.path.join(d, "port"))
        while not os.path.exists(os.path.join(d, "attacked")):
            time.sleep(0.05)
        print("value", c.get("job/value"), c.get("job/planted"))
    """)
    with Job([PY, "-m", "tf_hvd.runner", "-np", "1", PY, script, str(tmp_path)],
             env=clean_env(), cwd=REPO, merge_stderr=False) as job:
        deadline = time.monotonic() + 30
        while not (tmp_path / "port").exists():
            assert time.monotonic() < deadline and job.running()
            time.sleep(0.05)
        port = int((tmp_path / "port").read_text())
        for method, path, body in (("PUT", "/job/value", b"forged"),
                                   ("PUT", "/job/planted", b"x"),
                                   ("DELETE", "/job/value", b""),
                                   ("GET", "/job/value", b"")):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request(method, path, body=body)
            resp = conn.getresponse()
            assert resp.status == 403 and b"genuine" not in resp.read()
            conn.close()
        (tmp_path / "attacked").write_text("")
        res = job.wait(30).check_finished()
    assert res.returncode == 0, res.describe()
    assert res.output.strip() == "[0]<stdout>:value b'genuine' None"
    err = res.stderr.decode()
    assert "refused a request from 127.0.0.1 (HTTP 403" in err
    assert "refused 4 requests in all" in err
    with pytest.raises(OSError):  # the server stopped with the job
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_local_job_server_listens_on_loopback_only(tmp_path):
    script = _script(tmp_path, """
        import os
        print(os.environ["HOROVOD_GLOO_RENDEZVOUS_ADDR"])
    """)
    proc = _launch(["-np", "1", "--verbose", PY, script])
    assert proc.returncode == 0
    assert "(bound to 127.0.0.1;" in proc.stderr.decode()
    assert proc.stdout.decode().strip() == "[0]<stdout>:127.0.0.1"


def test_enclosing_jobs_secret_is_not_inherited_or_forwarded():
    base = {"PATH": "/bin", auth.SECRET_ENV: "stale", "HOROVOD_LOG_LEVEL": "INFO"}
    assert auth.SECRET_ENV not in rank_env.process_env(base, {})
    assert rank_env.process_env(base, {auth.SECRET_ENV: "new"})[auth.SECRET_ENV] == "new"
    assert auth.SECRET_ENV not in rank_env.forwarded_env(base, {})


def test_remote_ranks_read_the_secret_from_stdin(monkeypatch):
    monkeypatch.setattr(network, "address_towards", lambda host: "10.1.1.1")
    args = cli.parse(["-np", "2", "-H", "localhost:1,node2:1", "python", "t.py"])
    p = plan_mod.Plan(launch_config.freeze(args, {}), is_local=lambda h: h == "localhost",
                      check_command=None)
    envs = [e.to_environ() for e in p.rank_envs("10.1.1.1", 7)]
    secret = auth.new_secret()
    base = {"PATH": "/bin", auth.SECRET_ENV: secret}
    argv, local = p.rank_argv(p.slots[1], envs[1], "/tmp", base_env=base,
                              stdin_vars=(auth.SECRET_ENV,))
    assert not local
    assert secret not in " ".join(argv)  # never on a command line (ps shows those)
    # What the remote shell does with it: run that shell text here, secret on stdin.
    remote = ssh.remote_shell_command(
        [PY, "-c", "import os; print(os.environ['%s'], os.environ['HOROVOD_RANK'])"
         % auth.SECRET_ENV], {"HOROVOD_RANK": "1"}, "/tmp", (auth.SECRET_ENV,))
    res = run(["sh", "-c", remote], 30, env=clean_env(), input=(secret + "\n").encode(),
              merge_stderr=False).check_finished()
    assert res.returncode == 0, res.describe()
    out = res.output
    assert out.split() == [secret, "1"]
    words = shlex.split(argv[-1])
    assert words[words.index("--stdin-vars") + 1] == auth.SECRET_ENV


# -- helpers ------------------------------------------------------------------------------

def test_nonce_cache_forgets_after_the_window_and_is_bounded():
    cache = auth.NonceCache(window=10, capacity=3)
    assert cache.add("nonce-aaa", now=0)
    assert not cache.add("nonce-aaa", now=5)       # replay within the window
    assert cache.add("nonce-aaa", now=20)          # expired (its timestamp is refused anyway)
    for i, n in enumerate(["nonce-b01", "nonce-b02", "nonce-b03"]):
        assert cache.add(n, now=21 + i)
    assert len(cache) <= 3


def test_mask_hides_the_secret_in_text_and_bytes():
    secret = auth.new_secret()
    assert auth.mask("x%sy" % secret, secret) == "x****y"
    assert auth.mask(("a %s b" % secret).encode(), secret) == b"a **** b"
    assert auth.mask("nothing", "") == "nothing"


def test_rank_output_is_redacted(tmp_path):
    import io
    from tf_hvd.runner.processes import output
    secret = auth.new_secret()
    r, w = os.pipe()
    dest = io.BytesIO()
    t = output.forward(os.fdopen(r, "rb"), 3, "stdout", dest, str(tmp_path), redact=secret)
    with os.fdopen(w, "wb") as f:
        f.write(("env %s end\nplain\n" % secret).encode())
    t.join(10)
    assert dest.getvalue() == b"[3]<stdout>:env **** end\n[3]<stdout>:plain\n"
    assert (tmp_path / "rank.3" / "stdout").read_bytes() == b"env **** end\nplain\n"


def test_signature_covers_every_part():
    s = auth.new_secret()
    base = auth.request_signature(s, "PUT", "/a/b", 100, "nonce-123", b"body")
    assert base == auth.request_signature(s, "PUT", "/a/b", 100, "nonce-123", b"body")
    for args in [("GET", "/a/b", 100, "nonce-123", b"body"),
                 ("PUT", "/a/c", 100, "nonce-123", b"body"),
                 ("PUT", "/a/b", 101, "nonce-123", b"body"),
                 ("PUT", "/a/b", 100, "nonce-124", b"body"),
                 ("PUT", "/a/b", 100, "nonce-123", b"bodz"),
                 # field boundaries cannot be shifted to forge another request
                 ("PUT", "/a/b\n100", 100, "nonce-123", b"body")]:
        assert auth.request_signature(s, *args) != base, args
    assert auth.request_signature(auth.new_secret(), "PUT", "/a/b", 100, "nonce-123",
                                  b"body") != base

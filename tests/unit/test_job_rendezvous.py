"""The rendezvous HTTP key-value store (tf_hvd.job.rendezvous), exercised over real sockets."""

import concurrent.futures
import http.client
import os
import socket
import threading
import time

import pytest

from tf_hvd.job import auth
from tf_hvd.job.rendezvous import KVStore, RendezvousServer


@pytest.fixture
def server():
    s = RendezvousServer("127.0.0.1")
    s.start()
    yield s
    s.stop()


def _conn(server):
    return http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)


def _signed(server, method, path, body):
    return auth.sign_request(server.secret, method, path, body or b"")


def _request(server, method, path, body=None, headers=None):
    """A signed request; the reply's signature is checked too."""
    conn = _conn(server)
    try:
        signed = _signed(server, method, path, body)
        signed.update(headers or {})
        conn.request(method, path, body=body, headers=signed)
        resp = conn.getresponse()
        data = resp.read()
        assert resp.getheader(auth.HEADER_SIGNATURE) == auth.response_signature(
            server.secret, resp.status, signed[auth.HEADER_NONCE], data)
        return resp.status, data, dict(resp.getheaders())
    finally:
        conn.close()


def test_kvstore_basics():
    kv = KVStore()
    assert kv.get("a") is None
    kv.put("a", b"1")
    kv.put("b", bytearray(b"2"))
    assert kv.get("a") == b"1" and kv.get("b") == b"2"
    assert kv.keys() == ["a", "b"]
    kv.delete("a")
    kv.delete("missing")
    assert kv.keys() == ["b"]


def test_ephemeral_port(server):
    assert isinstance(server.port, int) and server.port > 0


def test_put_get_delete(server):
    status, body, headers = _request(server, "GET", "/global/rank0")
    assert status == 404 and body == b""
    assert headers["Content-Length"] == "0"

    status, body, headers = _request(server, "PUT", "/global/rank0", b"address:1234")
    assert status == 200 and headers["Content-Length"] == "0"
    assert server.store.get("global/rank0") == b"address:1234"

    status, body, headers = _request(server, "GET", "/global/rank0")
    assert status == 200 and body == b"address:1234"
    assert headers["Content-Length"] == str(len(b"address:1234"))

    status, _, _ = _request(server, "PUT", "/global/rank0", b"overwritten")
    assert _request(server, "GET", "/global/rank0")[1] == b"overwritten"

    status, body, _ = _request(server, "DELETE", "/global/rank0")
    assert status == 200
    assert _request(server, "GET", "/global/rank0")[0] == 404
    # deleting something absent is fine
    assert _request(server, "DELETE", "/global/never")[0] == 200


def test_scopes_are_separate(server):
    _request(server, "PUT", "/s1/k", b"one")
    _request(server, "PUT", "/s2/k", b"two")
    assert _request(server, "GET", "/s1/k")[1] == b"one"
    assert _request(server, "GET", "/s2/k")[1] == b"two"


def test_binary_bodies(server):
    blobs = {
        "/bin/zeros": b"\x00" * 1000,
        "/bin/all_bytes": bytes(range(256)) * 4,
        "/bin/random": os.urandom(3 * 1024 * 1024 + 17),
        "/bin/empty": b"",
        "/bin/crlf": b"\r\n\r\nHTTP/1.1 200 OK\r\n",
    }
    for path, blob in blobs.items():
        assert _request(server, "PUT", path, blob)[0] == 200
    for path, blob in blobs.items():
        status, body, _ = _request(server, "GET", path)
        assert status == 200 and body == blob, path


def test_keep_alive_many_requests_on_one_connection(server):
    conn = _conn(server)
    try:
        for i in range(50):
            conn.request("PUT", "/ka/%d" % i, body=b"v%d" % i,
                         headers=_signed(server, "PUT", "/ka/%d" % i, b"v%d" % i))
            resp = conn.getresponse()
            assert resp.status == 200
            resp.read()
        for i in range(50):
            conn.request("GET", "/ka/%d" % i, headers=_signed(server, "GET", "/ka/%d" % i, b""))
            resp = conn.getresponse()
            assert resp.status == 200 and resp.read() == b"v%d" % i
        conn.request("GET", "/ka/missing", headers=_signed(server, "GET", "/ka/missing", b""))
        resp = conn.getresponse()
        assert resp.status == 404
        resp.read()
    finally:
        conn.close()


def test_post_is_put_and_chunked_body(server):
    assert _request(server, "POST", "/p/k", b"posted")[0] == 200
    assert server.store.get("p/k") == b"posted"

    conn = _conn(server)
    try:
        chunks = iter([b"hello ", b"chunked ", b"\x00world"])
        conn.request("PUT", "/p/chunked", body=chunks, encode_chunked=True,
                     headers=_signed(server, "PUT", "/p/chunked", b"hello chunked \x00world"))
        resp = conn.getresponse()
        assert resp.status == 200
        resp.read()
    finally:
        conn.close()
    assert server.store.get("p/chunked") == b"hello chunked \x00world"


def test_query_string_ignored_and_empty_key_rejected(server):
    _request(server, "PUT", "/q/key?ignored=1", b"x")
    assert _request(server, "GET", "/q/key")[1] == b"x"
    assert _request(server, "PUT", "/", b"x")[0] == 400
    assert _request(server, "GET", "/")[0] == 404


def test_concurrent_clients_poll_until_set(server):
    """Like Gloo ranks: everyone publishes its key, then polls for everyone else's."""
    n = 16

    def rank(r):
        conn = _conn(server)
        try:
            blob = b"addr-%d-" % r + bytes([r]) * 100
            conn.request("PUT", "/rdv/rank%d" % r, body=blob,
                         headers=_signed(server, "PUT", "/rdv/rank%d" % r, blob))
            resp = conn.getresponse()
            assert resp.status == 200
            resp.read()
            got = {}
            deadline = time.monotonic() + 20
            while len(got) < n and time.monotonic() < deadline:
                for peer in range(n):
                    if peer in got:
                        continue
                    conn.request("GET", "/rdv/rank%d" % peer,
                                 headers=_signed(server, "GET", "/rdv/rank%d" % peer, b""))
                    resp = conn.getresponse()
                    body = resp.read()
                    if resp.status == 200:
                        got[peer] = body
                    else:
                        assert resp.status == 404
                time.sleep(0.01)
            return got
        finally:
            conn.close()

    barrier_start = threading.Event()

    def delayed(r):
        barrier_start.wait(10)
        if r % 3 == 0:
            time.sleep(0.2)  # late arrivals: others must see 404 first and keep polling
        return rank(r)

    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        futures = [pool.submit(delayed, r) for r in range(n)]
        barrier_start.set()
        results = [f.result(timeout=60) for f in futures]
    for got in results:
        assert sorted(got) == list(range(n))
        for peer, body in got.items():
            assert body == b"addr-%d-" % peer + bytes([peer]) * 100


def test_idle_open_connection_does_not_block_others(server):
    idle = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    try:
        head = "".join("%s: %s\r\n" % kv for kv in
                       _signed(server, "PUT", "/x/y", b"abcdefghij").items())
        idle.sendall(b"PUT /x/y HTTP/1.1\r\nHost: a\r\n" + head.encode() +
                     b"Content-Length: 10\r\n\r\nabc")  # stalls
        assert _request(server, "PUT", "/x/z", b"ok")[0] == 200
        assert _request(server, "GET", "/x/z")[1] == b"ok"
    finally:
        idle.close()


def test_stop_releases_port_and_is_idempotent():
    s = RendezvousServer("127.0.0.1")
    port = s.start()
    s.stop()
    s.stop()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_context_manager():
    with RendezvousServer("127.0.0.1") as s:
        assert _request(s, "PUT", "/c/m", b"1")[0] == 200

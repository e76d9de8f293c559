"""The rendezvous key-value store: a small HTTP server the ranks' Gloo contexts use.

Protocol (HTTP/1.1, keep-alive allowed, Content-Length always sent):

* ``PUT /<scope>/<key>`` with the raw bytes as the body -> 200 (POST is treated alike)
* ``GET /<scope>/<key>`` -> 200 with the stored bytes, or 404 when not set yet
  (clients poll)
* ``DELETE /<scope>/<key>`` -> 200 (also when the key was not set)

Every request must be signed with the job's secret (auth.py describes the headers);
one that is not, or is signed wrongly, or replays an earlier request, gets 403 and
changes nothing. Replies to signed requests are signed too.

Keys are the request path without the leading slash and without any query string,
taken verbatim (no percent-decoding), so a client that PUTs and GETs the same path
always meets itself. Bodies are arbitrary bytes. Each connection is served by its own
thread, so ranks that poll do not block each other.

Limits (each refusal closes the connection): request target 4 KiB (414), body
``max_body`` bytes (413), everything stored ``max_total`` bytes (507),
``max_connections`` connections at a time (extra ones are closed at once), and a
connection idle for ``idle_timeout`` seconds is dropped.
"""

import hmac
import http.client
import http.server
import threading

from . import auth
from . import rank_env

MAX_PATH = 4096
DEFAULT_MAX_BODY = 16 << 20       # Gloo stores ~150 bytes per rank per key
DEFAULT_MAX_TOTAL = 256 << 20
DEFAULT_MAX_CONNECTIONS = 1024
DEFAULT_IDLE_TIMEOUT = 60.0


class KVStore(object):
    """Thread-safe dict of bytes with a bound on the total size of the values."""

    def __init__(self, max_total=None):
        self._lock = threading.Lock()
        self._data = {}
        self._bytes = 0
        self._max_total = max_total

    def put(self, key, value):
        """Store ``value``; False (and nothing stored) if that would exceed the bound."""
        value = bytes(value)
        with self._lock:
            old = self._data.get(key)
            new_total = self._bytes + len(value) - (len(old) if old is not None else 0)
            if self._max_total is not None and new_total > self._max_total:
                return False
            self._data[key] = value
            self._bytes = new_total
            return True

    def get(self, key):
        with self._lock:
            return self._data.get(key)

    def delete(self, key):
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._bytes -= len(old)

    def keys(self):
        with self._lock:
            return sorted(self._data)

    def total_bytes(self):
        with self._lock:
            return self._bytes


class _Refused(Exception):
    def __init__(self, code, reason):
        Exception.__init__(self, reason)
        self.code = code
        self.reason = reason


class _KVRequestHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "tf_hvd-rendezvous/1"
    # Buffer the reply so status line, headers and body leave in one write (the base
    # class flushes after each request), and disable Nagle: small request/reply
    # exchanges on keep-alive connections would otherwise wait for delayed ACKs.
    wbufsize = 1 << 16
    disable_nagle_algorithm = True

    def setup(self):
        self.timeout = self.server.idle_timeout  # socket timeout for every read
        http.server.BaseHTTPRequestHandler.setup(self)

    # -- helpers ---------------------------------------------------------------
    def _key(self):
        path = self.path.split("?", 1)[0].split("#", 1)[0]
        return path.lstrip("/")

    def _reply(self, code, body=b"", content_type="application/octet-stream", nonce=None):
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        sent = body if self.command != "HEAD" else b""
        self.send_header("Content-Length", str(len(body)))
        if nonce is not None:
            self.send_header(auth.HEADER_SIGNATURE,
                             auth.response_signature(self.server.secret, code, nonce, sent))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if sent:
            self.wfile.write(sent)

    def _read_body(self):
        limit = self.server.max_body
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            total = 0
            while True:
                size_line = self.rfile.readline(1024)
                if not size_line:
                    raise _Refused(400, "connection closed inside a chunked body")
                try:
                    size = int(size_line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise _Refused(400, "malformed chunk size")
                if size < 0 or total + size > limit:
                    raise _Refused(413, "request body larger than %d bytes" % limit)
                if size == 0:
                    # trailers, up to the empty line
                    for _ in range(100):
                        if self.rfile.readline(65536) in (b"\r\n", b"\n", b""):
                            break
                    return b"".join(chunks)
                chunk = self.rfile.read(size)
                if len(chunk) != size:
                    raise _Refused(400, "connection closed inside a chunked body")
                chunks.append(chunk)
                total += size
                self.rfile.readline(1024)  # CRLF after each chunk
        length = self.headers.get("Content-Length")
        if length is None:
            return b""
        try:
            n = int(length)
        except ValueError:
            raise _Refused(400, "bad Content-Length %r" % length[:40])
        if n < 0:
            raise _Refused(400, "bad Content-Length %r" % length[:40])
        if n > limit:
            raise _Refused(413, "request body of %d bytes is larger than %d bytes" % (n, limit))
        data = self.rfile.read(n)
        if len(data) != n:
            raise _Refused(400, "connection closed after %d of %d body bytes" % (len(data), n))
        return data

    def _authenticate(self):
        """Read and check one request; returns (nonce, body). Raises _Refused."""
        if len(self.path) > MAX_PATH:
            raise _Refused(414, "request target longer than %d characters" % MAX_PATH)
        try:
            timestamp, nonce, signature = auth.check_headers(self.headers)
        except auth.AuthError as e:
            raise _Refused(403, str(e))
        body = self._read_body()
        try:
            auth.verify_request(self.server.secret, self.command, self.path, timestamp,
                                nonce, signature, body)
        except auth.AuthError as e:
            raise _Refused(403, str(e))
        if not self.server.nonces.add(nonce):
            raise _Refused(403, "replayed request (nonce already used)")
        return nonce, body

    def _handle(self, action):
        try:
            nonce, body = self._authenticate()
        except _Refused as e:
            # The body may be unread: the connection cannot be reused.
            self.close_connection = True
            self.server.note_refusal(self.client_address, e.code, e.reason)
            self._reply(e.code, (e.reason + "\n").encode("utf-8", "replace"), "text/plain")
            return
        code, reply = action(body)
        self._reply(code, reply, "application/octet-stream" if code == 200 else "text/plain",
                    nonce=nonce)

    def _store(self):
        return self.server.kv_store

    # -- methods ---------------------------------------------------------------
    def _put(self, body):
        key = self._key()
        if not key:
            return 400, b"empty key\n"
        if not self._store().put(key, body):
            return 507, b"rendezvous store is full\n"
        return 200, b""

    def _get(self, body):
        key = self._key()
        value = self._store().get(key) if key else None
        return (404, b"") if value is None else (200, value)

    def _delete(self, body):
        key = self._key()
        if key:
            self._store().delete(key)
        return 200, b""

    def do_PUT(self):
        self._handle(self._put)

    do_POST = do_PUT

    def do_GET(self):
        self._handle(self._get)

    def do_HEAD(self):
        self._handle(self._get)

    def do_DELETE(self):
        self._handle(self._delete)

    def log_message(self, fmt, *args):
        if self.server.verbose:
            http.server.BaseHTTPRequestHandler.log_message(self, fmt, *args)


class _ThreadingKVServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, address, handler, max_connections):
        self._active = 0
        self._active_lock = threading.Lock()
        self.max_connections = max_connections
        http.server.ThreadingHTTPServer.__init__(self, address, handler)

    def process_request(self, request, client_address):
        with self._active_lock:
            full = self._active >= self.max_connections
            if not full:
                self._active += 1
        if full:
            self.note_refusal(client_address, 503, "too many connections")
            self.shutdown_request(request)
            return
        http.server.ThreadingHTTPServer.process_request(self, request, client_address)

    def process_request_thread(self, request, client_address):
        try:
            http.server.ThreadingHTTPServer.process_request_thread(self, request,
                                                                   client_address)
        finally:
            with self._active_lock:
                self._active -= 1

    def handle_error(self, request, client_address):
        if self.verbose:
            http.server.ThreadingHTTPServer.handle_error(self, request, client_address)

    def note_refusal(self, client_address, code, reason):
        self.owner._note_refusal(client_address, code, reason)


class RendezvousServer(object):
    """Runs the KV store over HTTP in a background thread.

    >>> server = RendezvousServer("127.0.0.1", secret=auth.new_secret())
    >>> port = server.start()    # an ephemeral port: ranks meet at 127.0.0.1:port
    >>> port > 0
    True
    >>> server.stop()

    Without ``secret`` a random one is made (``server.secret``); there is no
    unauthenticated mode. ``on_refusal(client_address, code, reason, first)`` is
    called for every refused request.
    """

    def __init__(self, bind_address="127.0.0.1", port=0, verbose=False, secret=None,
                 max_body=DEFAULT_MAX_BODY, max_total=DEFAULT_MAX_TOTAL,
                 max_connections=DEFAULT_MAX_CONNECTIONS,
                 idle_timeout=DEFAULT_IDLE_TIMEOUT, on_refusal=None):
        self.bind_address = bind_address
        self.secret = secret or auth.new_secret()
        self.store = KVStore(max_total)
        self.nonces = auth.NonceCache()
        self._requested_port = port
        self._verbose = verbose
        self._max_body = max_body
        self._max_connections = max_connections
        self._idle_timeout = idle_timeout
        self._on_refusal = on_refusal
        self._refusal_lock = threading.Lock()
        self.refusals = 0  # requests refused so far (403, 413, ...)
        self._httpd = None
        self._thread = None

    @property
    def port(self):
        return self._httpd.server_address[1] if self._httpd else None

    def _note_refusal(self, client_address, code, reason):
        with self._refusal_lock:
            self.refusals += 1
            first = self.refusals == 1
        if self._on_refusal is not None:
            self._on_refusal(client_address, code, reason, first)

    def start(self):
        """Bind (port 0 = ephemeral), start serving, return the port."""
        httpd = _ThreadingKVServer((self.bind_address, self._requested_port),
                                   _KVRequestHandler, self._max_connections)
        httpd.kv_store = self.store
        httpd.secret = self.secret
        httpd.nonces = self.nonces
        httpd.verbose = self._verbose
        httpd.max_body = self._max_body
        httpd.idle_timeout = self._idle_timeout
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.1},
            name="tf_hvd-rendezvous", daemon=True)
        self._thread.start()
        return self.port

    def stop(self):
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)
        self._httpd = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()


class RendezvousError(Exception):
    pass


class RendezvousClient(object):
    """A signing client of the store (tests, tools, Python-side ranks).

    ``request`` returns (status, body) and checks the reply's signature; a reply
    that is not signed by the job's secret raises RendezvousError. 403 replies are
    returned as they are (they are not signed: the server did not trust the request).
    """

    def __init__(self, host, port, secret, timeout=30):
        self.host, self.port, self.secret = host, int(port), secret
        self._conn = http.client.HTTPConnection(host, self.port, timeout=timeout)

    @classmethod
    def from_env(cls, environ, timeout=30):
        """The rank's view: address, port and secret from its RankEnv. KeyError names
        the first of them that is not set."""
        rank = rank_env.RankEnv.from_environ(environ)
        for name, value in ((rank_env.RENDEZVOUS_ADDR, rank.rendezvous_addr),
                            (rank_env.RENDEZVOUS_PORT, rank.rendezvous_port),
                            (rank_env.SECRET, rank.secret)):
            if value is None:
                raise KeyError(name)
        return cls(rank.rendezvous_addr, rank.rendezvous_port, rank.secret, timeout=timeout)

    def request(self, method, path, body=b"", headers=None):
        if not path.startswith("/"):
            path = "/" + path
        body = bytes(body or b"")
        signed = auth.sign_request(self.secret, method, path, body)
        signed.update(headers or {})
        try:
            self._conn.request(method, path, body=body, headers=signed)
            resp = self._conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException):
            self._conn.close()
            raise
        if resp.status != 403:
            expected = auth.response_signature(self.secret, resp.status,
                                               signed[auth.HEADER_NONCE], data)
            got = resp.getheader(auth.HEADER_SIGNATURE) or ""
            if not hmac.compare_digest(expected, got):
                raise RendezvousError("reply from %s:%d is not signed with the job's secret"
                                      % (self.host, self.port))
        if resp.getheader("Connection", "").lower() == "close":
            self._conn.close()
        return resp.status, data

    def put(self, key, value):
        return self.request("PUT", key, value)[0]

    def get(self, key):
        status, data = self.request("GET", key)
        return data if status == 200 else None

    def delete(self, key):
        return self.request("DELETE", key)[0]

    def close(self):
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

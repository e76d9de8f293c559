"""The rendezvous key-value store: a small HTTP server the ranks' Gloo contexts use.

Protocol (HTTP/1.1, keep-alive allowed, Content-Length always sent):

* ``PUT /<scope>/<key>`` with the raw bytes as the body -> 200 (POST is treated alike)
* ``GET /<scope>/<key>`` -> 200 with the stored bytes, or 404 when not set yet
  (clients poll)
* ``DELETE /<scope>/<key>`` -> 200 (also when the key was not set)

Keys are the request path without the leading slash and without any query string,
taken verbatim (no percent-decoding), so a client that PUTs and GETs the same path
always meets itself. Bodies are arbitrary bytes. Each connection is served by its own
thread, so ranks that poll do not block each other.
"""

import http.server
import threading

_MAX_BODY = 1 << 30  # refuse absurd uploads rather than trying to allocate them


class KVStore(object):
    """Thread-safe dict of bytes."""

    def __init__(self):
        self._lock = threading.Lock()
        self._data = {}

    def put(self, key, value):
        with self._lock:
            self._data[key] = bytes(value)

    def get(self, key):
        with self._lock:
            return self._data.get(key)

    def delete(self, key):
        with self._lock:
            self._data.pop(key, None)

    def keys(self):
        with self._lock:
            return sorted(self._data)


class _KVRequestHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "tf_hvd-rendezvous/1"
    # Buffer the reply so status line, headers and body leave in one write (the base
    # class flushes after each request), and disable Nagle: small request/reply
    # exchanges on keep-alive connections would otherwise wait for delayed ACKs.
    wbufsize = 1 << 16
    disable_nagle_algorithm = True

    # -- helpers ---------------------------------------------------------------
    def _key(self):
        path = self.path.split("?", 1)[0].split("#", 1)[0]
        return path.lstrip("/")

    def _reply(self, code, body=b"", content_type="application/octet-stream"):
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def _read_body(self):
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while True:
                size_line = self.rfile.readline(1024)
                if not size_line:
                    raise ValueError("connection closed inside a chunked body")
                size = int(size_line.split(b";", 1)[0].strip(), 16)
                if size == 0:
                    # trailers, up to the empty line
                    while self.rfile.readline(65536) not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline(1024)  # CRLF after each chunk
        length = self.headers.get("Content-Length")
        if length is None:
            return b""
        n = int(length)
        if n < 0 or n > _MAX_BODY:
            raise ValueError("bad Content-Length %r" % length)
        data = self.rfile.read(n)
        if len(data) != n:
            raise ValueError("connection closed after %d of %d body bytes" % (len(data), n))
        return data

    def _store(self):
        return self.server.kv_store

    # -- methods ---------------------------------------------------------------
    def do_PUT(self):
        key = self._key()
        try:
            body = self._read_body()
        except ValueError as e:
            self.close_connection = True
            self._reply(400, str(e).encode(), "text/plain")
            return
        if not key:
            self._reply(400, b"empty key", "text/plain")
            return
        self._store().put(key, body)
        self._reply(200)

    do_POST = do_PUT

    def do_GET(self):
        key = self._key()
        value = self._store().get(key) if key else None
        if value is None:
            self._reply(404, b"", "text/plain")
        else:
            self._reply(200, value)

    def do_HEAD(self):
        self.do_GET()

    def do_DELETE(self):
        key = self._key()
        if key:
            self._store().delete(key)
        self._reply(200)

    def log_message(self, fmt, *args):
        if self.server.verbose:
            http.server.BaseHTTPRequestHandler.log_message(self, fmt, *args)


class _ThreadingKVServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 256


class RendezvousServer(object):
    """Runs the KV store over HTTP in a background thread.

    >>> server = RendezvousServer("127.0.0.1")
    >>> port = server.start()
    >>> ...
    >>> server.stop()
    """

    def __init__(self, bind_address="127.0.0.1", port=0, verbose=False):
        self.bind_address = bind_address
        self.store = KVStore()
        self._requested_port = port
        self._verbose = verbose
        self._httpd = None
        self._thread = None

    @property
    def port(self):
        return self._httpd.server_address[1] if self._httpd else None

    def start(self):
        """Bind (port 0 = ephemeral), start serving, return the port."""
        httpd = _ThreadingKVServer((self.bind_address, self._requested_port), _KVRequestHandler)
        httpd.kv_store = self.store
        httpd.verbose = self._verbose
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

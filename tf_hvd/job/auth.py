"""The job secret and the request signatures of the rendezvous protocol.

Every job started by tfhvdrun in Gloo mode gets a fresh random secret
(:func:`new_secret`, 256 bits, hex-encoded). The launcher's rendezvous server and
the ranks share it; nobody else has it. Ranks receive it in the environment variable
``HOROVOD_GLOO_RENDEZVOUS_SECRET`` (local ranks) or on ssh's standard input (remote
ranks, so that it never appears on a command line).

Signed requests (the C++ client in cc/common/gloo/http_store.cc does the same):

* header ``X-Tfhvd-Timestamp``: the client's clock, integer seconds since the epoch;
  the server accepts it when within ``MAX_CLOCK_SKEW`` seconds of its own clock;
* header ``X-Tfhvd-Nonce``: 8 to 128 characters from ``[A-Za-z0-9._-]``, never reused
  (the server refuses a nonce it has seen within the accepted time window);
* header ``X-Tfhvd-Signature``: lowercase hex of HMAC-SHA256 with the secret (its
  ASCII text is the key) over ::

      "tf_hvd-rendezvous-v1\\n" METHOD "\\n" PATH "\\n" TIMESTAMP "\\n" NONCE "\\n" BODY

  where PATH is the request target exactly as sent (including any query string)
  and BODY the raw request body (empty for GET/DELETE).

Every reply to a request that passed these checks carries ``X-Tfhvd-Signature``:
HMAC-SHA256 over ``"tf_hvd-rendezvous-v1-response\\n" STATUS "\\n" NONCE "\\n" BODY``
(STATUS the three-digit code, NONCE the request's), so a client also knows that the
answer came from its launcher and belongs to its request. A request that fails any
check gets 403 and changes nothing.
"""

import collections
import hashlib
import hmac
import re
import secrets
import threading
import time

SECRET_ENV = "HOROVOD_GLOO_RENDEZVOUS_SECRET"

HEADER_TIMESTAMP = "X-Tfhvd-Timestamp"
HEADER_NONCE = "X-Tfhvd-Nonce"
HEADER_SIGNATURE = "X-Tfhvd-Signature"

REQUEST_DOMAIN = b"tf_hvd-rendezvous-v1\n"
RESPONSE_DOMAIN = b"tf_hvd-rendezvous-v1-response\n"

MAX_CLOCK_SKEW = 300  # seconds
MASK = "****"

_NONCE_RE = re.compile(r"^[A-Za-z0-9._\-]{8,128}$")
_SIGNATURE_RE = re.compile(r"^[0-9a-f]{64}$")
_TIMESTAMP_RE = re.compile(r"^[0-9]{1,12}$")


class AuthError(Exception):
    """A request that must be refused; str(e) says why (never containing the secret)."""


def new_secret():
    """A fresh job secret: 32 random bytes as 64 hex characters."""
    return secrets.token_hex(32)


def _key(secret):
    return secret.encode("ascii") if isinstance(secret, str) else bytes(secret)


def _text(value):
    return value.encode("latin-1") if isinstance(value, str) else bytes(value)


def request_signature(secret, method, path, timestamp, nonce, body=b""):
    """Hex HMAC-SHA256 of one request (see the module docstring)."""
    message = b"".join([REQUEST_DOMAIN, _text(method), b"\n", _text(path), b"\n",
                        _text(str(timestamp)), b"\n", _text(nonce), b"\n", bytes(body)])
    return hmac.new(_key(secret), message, hashlib.sha256).hexdigest()


def response_signature(secret, status, nonce, body=b""):
    """Hex HMAC-SHA256 of one reply to the request that carried ``nonce``."""
    message = b"".join([RESPONSE_DOMAIN, b"%03d" % int(status), b"\n", _text(nonce), b"\n",
                        bytes(body)])
    return hmac.new(_key(secret), message, hashlib.sha256).hexdigest()


def new_nonce():
    return secrets.token_hex(16)


def sign_request(secret, method, path, body=b"", timestamp=None, nonce=None):
    """The three authentication headers for one request, as a dict."""
    timestamp = int(time.time()) if timestamp is None else int(timestamp)
    nonce = new_nonce() if nonce is None else nonce
    return {
        HEADER_TIMESTAMP: str(timestamp),
        HEADER_NONCE: nonce,
        HEADER_SIGNATURE: request_signature(secret, method, path, timestamp, nonce, body),
    }


def check_headers(headers, now=None, max_skew=MAX_CLOCK_SKEW):
    """Well-formedness and freshness of the headers, before the body is read.

    Returns (timestamp, nonce, signature); raises AuthError.
    """
    timestamp = headers.get(HEADER_TIMESTAMP)
    nonce = headers.get(HEADER_NONCE)
    signature = headers.get(HEADER_SIGNATURE)
    if timestamp is None or nonce is None or signature is None:
        raise AuthError("missing authentication headers (the rendezvous server only "
                        "accepts requests signed with the job's secret)")
    if not _TIMESTAMP_RE.match(timestamp) or not _NONCE_RE.match(nonce) or \
            not _SIGNATURE_RE.match(signature):
        raise AuthError("malformed authentication headers")
    now = time.time() if now is None else now
    if abs(int(timestamp) - now) > max_skew:
        raise AuthError("request timestamp is %+d s away from the server's clock (allowed: "
                        "%d s); check the clocks of the hosts" % (int(timestamp) - now, max_skew))
    return timestamp, nonce, signature


def verify_request(secret, method, path, timestamp, nonce, signature, body):
    """Raises AuthError unless ``signature`` is right (compared in constant time)."""
    expected = request_signature(secret, method, path, timestamp, nonce, body)
    if not hmac.compare_digest(expected, signature):
        raise AuthError("wrong signature (not signed with this job's secret)")


class NonceCache(object):
    """Nonces seen within the accepted time window: a replayed request is refused.

    Entries older than the window are forgotten (their timestamps would be refused
    anyway); beyond ``capacity`` entries the oldest go first.
    """

    def __init__(self, window=2 * MAX_CLOCK_SKEW + 1, capacity=1 << 20):
        self._window = window
        self._capacity = capacity
        self._seen = collections.OrderedDict()
        self._lock = threading.Lock()

    def add(self, nonce, now=None):
        """Record ``nonce``; False if it was seen already."""
        now = time.monotonic() if now is None else now
        with self._lock:
            while self._seen:
                oldest, when = next(iter(self._seen.items()))
                if now - when <= self._window and len(self._seen) < self._capacity:
                    break
                del self._seen[oldest]
            if nonce in self._seen:
                return False
            self._seen[nonce] = now
            return True

    def __len__(self):
        with self._lock:
            return len(self._seen)


def mask(text, secret):
    """``text`` with every occurrence of ``secret`` replaced by ****."""
    if not secret:
        return text
    if isinstance(text, bytes):
        return text.replace(_key(secret), MASK.encode())
    return text.replace(secret, MASK)

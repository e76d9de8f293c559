"""The C++ signing of the Gloo set-up (cc/common/gloo/signing.cc, on the system's OpenSSL
libcrypto) against Python: HMAC-SHA256 equal to ``hmac.new(key, msg, sha256)`` and the
rendezvous signatures equal to tf_hvd/job/auth.py's.

TensorFlow's libtensorflow_framework.so.2 exports BoringSSL under OpenSSL's names (HMAC,
RAND_bytes, CRYPTO_memcmp, ...). _hvd.so neither links nor bundles OpenSSL: it loads the
system's libcrypto.so.3 (or .so.1.1) at run time and takes every function from that
library's handle (cc/common/gloo/crypto_library.h), so its calls cannot bind to
TensorFlow's copy: the checks run in a process that imported tensorflow first, and _hvd.so
must neither need libcrypto nor import, export or contain any OpenSSL name.

    PYTHONPATH=$PWD python -m pytest -q tests/unit/test_signing.py
"""

import hashlib
import hmac
import json
import os
import random
import shutil
import subprocess
import sys

import pytest

from tf_hvd.job import auth

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIB = os.path.join(REPO, "tf_hvd", "_hvd.so")

pytestmark = pytest.mark.skipif(not os.path.exists(LIB), reason="tf_hvd/_hvd.so is not built")

# OpenSSL names that libtensorflow_framework.so.2 also defines (BoringSSL).
OPENSSL_PREFIXES = ("HMAC", "EVP_", "RAND_", "CRYPTO_", "OPENSSL_", "SHA256", "ERR_")


def _cases():
    rng = random.Random(1234)
    cases = [(b"", b""), (b"key", b"The quick brown fox jumps over the lazy dog"),
             (b"\x0b" * 20, b"Hi There"),                       # RFC 4231 case 1
             (b"Jefe", b"what do ya want for nothing?"),       # RFC 4231 case 2
             (b"\xaa" * 131, b"Test Using Larger Than Block-Size Key - Hash Key First")]
    for key_len, msg_len in [(1, 1), (32, 55), (64, 56), (65, 64), (200, 1000), (7, 70000)]:
        cases.append((bytes(rng.randrange(256) for _ in range(key_len)),
                      bytes(rng.randrange(256) for _ in range(msg_len))))
    return cases


# Runs in a fresh interpreter: tensorflow first, then tf_hvd's library.
CHILD = r"""
import json, sys
import tensorflow
from tf_hvd import basics
lib = basics._lib
cases = [(bytes.fromhex(k), bytes.fromhex(m)) for k, m in json.loads(sys.stdin.read())]
macs = [lib._hmac_sha256_hex(k, m) for k, m in cases]
maps = open("/proc/self/maps").read().split()
print(json.dumps([macs, sorted({p.rsplit("/", 1)[-1] for p in maps if "libcrypto.so" in p})]))
"""


def test_hmac_equals_python_hmac_after_importing_tensorflow():
    cases = _cases()
    env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps(
        [(k.hex(), m.hex()) for k, m in cases]).encode(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=env, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    got, loaded = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    # the system's OpenSSL (3.x, else 1.1.1) is mapped: loaded at run time
    assert set(loaded) & {"libcrypto.so.3", "libcrypto.so.1.1"}, loaded
    expected = [hmac.new(k, m, hashlib.sha256).hexdigest() for k, m in cases]
    assert got == expected
    # RFC 4231 test case 2, spelled out.
    assert got[3] == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"


@pytest.fixture(scope="module")
def lib():
    from tf_hvd import basics
    return basics._lib


def test_rendezvous_signatures_equal_auth_py(lib):
    rng = random.Random(99)
    secret = auth.new_secret()
    for method in ["GET", "PUT", "DELETE"]:
        for body in [b"", b"x", bytes(rng.randrange(256) for _ in range(3000))]:
            path = "/gloo/global/%d" % rng.randrange(100)
            ts, nonce = str(1700000000 + rng.randrange(10 ** 6)), auth.new_nonce()
            assert lib._rendezvous_request_signature(
                secret.encode(), method.encode(), path.encode(), ts.encode(), nonce.encode(),
                body) == auth.request_signature(secret, method, path, ts, nonce, body)
            for status in [200, 404, 403, 500]:
                assert lib._rendezvous_response_signature(
                    secret.encode(), status, nonce.encode(), body) == \
                    auth.response_signature(secret, status, nonce, body)
    # a different secret gives a different signature
    assert lib._rendezvous_response_signature(b"a" * 64, 200, b"n" * 8, b"") != \
        auth.response_signature("b" * 64, 200, "n" * 8, b"")


def _nm(*args):
    return subprocess.run(["nm"] + list(args) + [LIB], stdout=subprocess.PIPE, check=True,
                          universal_newlines=True).stdout


@pytest.mark.skipif(shutil.which("nm") is None, reason="binutils' nm is not installed")
def test_libcrypto_is_neither_linked_nor_bundled():
    """_hvd.so does not need libcrypto/libssl (loaded at run time) and neither imports,
    exports nor contains OpenSSL's names (no static copy)."""
    needed = subprocess.run(["readelf", "-d", LIB], stdout=subprocess.PIPE, check=True,
                            universal_newlines=True).stdout
    assert "libcrypto" not in needed and "libssl" not in needed, needed
    names = [line.split()[-1].split("@")[0] for line in _nm("-D").splitlines() if line.strip()]
    assert sorted(n for n in names if n.startswith(OPENSSL_PREFIXES)) == []
    local = [line.split()[-1] for line in _nm().splitlines() if line.strip()]
    assert not [n for n in local if n in ("HMAC", "RAND_bytes", "CRYPTO_memcmp", "EVP_sha256",
                                          "OPENSSL_init_crypto")]

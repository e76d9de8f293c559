"""The rendezvous secret of a job that no launcher started (Slurm's srun, torchrun-style).

Where it comes from, first found wins:

1. ``HOROVOD_GLOO_RENDEZVOUS_SECRET`` in the environment: the user (``export
   HOROVOD_GLOO_RENDEZVOUS_SECRET=$(openssl rand -hex 32)`` before ``srun``, which
   propagates the environment over Slurm's munge-authenticated channel), or the
   operator (a Kubernetes Secret mapped to this variable) put it there.
2. The file named by ``TF_HVD_SECRET_FILE``, default ``~/.tf_hvd/rendezvous_secret``:
   it must belong to this user and be readable by nobody else (mode 0600). When it is
   missing, the first rank creates it atomically (a random 256-bit secret, written to
   a temporary file and linked into place, so concurrent ranks all read the one that
   won). With a home directory shared by the nodes (the usual cluster set-up) every
   rank reads the same secret; otherwise the nodes' secrets differ and the rendezvous
   refuses them, with an error that says so.

Other users cannot derive it: it is random, never on a command line, and a process's
environment and a 0600 file are readable only by its user (and root). The rendezvous
protocol sends only HMAC signatures made with it, never the secret.
"""

import errno
import os
import secrets
import stat
import time

from .rank_env import SECRET as SECRET_ENV
from .rank_env import SECRET_FILE as SECRET_FILE_ENV


class SecretError(RuntimeError):
    """No usable secret: the message says where one was looked for and how to give it."""


def default_secret_file(environ):
    home = environ.get("HOME") or os.path.expanduser("~")
    return os.path.join(home, ".tf_hvd", "rendezvous_secret")


def _check_private(path, st):
    if st.st_uid != os.getuid():
        raise SecretError("the secret file %s belongs to uid %d, not to this user (uid %d)"
                          % (path, st.st_uid, os.getuid()))
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SecretError("the secret file %s is readable by other users (mode %o); "
                          "`chmod 600 %s`" % (path, stat.S_IMODE(st.st_mode), path))


def _read(path):
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        _check_private(path, os.fstat(fd))
        text = os.read(fd, 4096).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    if len(text) < 32:
        raise SecretError("the secret file %s holds %d characters; a secret needs at least "
                          "32 (e.g. `openssl rand -hex 32 > %s`)" % (path, len(text), path))
    return text


def _create(path):
    """Create ``path`` with a fresh secret unless another rank just did; no partial file
    is ever visible (written aside, then hard-linked into place)."""
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    tmp = "%s.%d.%s.tmp" % (path, os.getpid(), secrets.token_hex(4))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, (secrets.token_hex(32) + "\n").encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except OSError as e:
        if e.errno != errno.EEXIST:
            raise
    finally:
        os.unlink(tmp)


def job_secret(environ):
    """The secret this rank signs its rendezvous requests with; (secret, where)."""
    value = environ.get(SECRET_ENV, "")
    if value:
        if len(value) < 32:
            raise SecretError("%s holds %d characters; a secret needs at least 32 "
                              "(e.g. `export %s=$(openssl rand -hex 32)`)"
                              % (SECRET_ENV, len(value), SECRET_ENV))
        return value, SECRET_ENV
    path = environ.get(SECRET_FILE_ENV) or default_secret_file(environ)
    for attempt in range(50):
        try:
            try:
                return _read(path), path
            except FileNotFoundError:
                _create(path)
        except OSError as e:
            raise SecretError(
                "no rendezvous secret: %s is not set and the secret file %s can be neither "
                "read nor created (%s); give every rank the same secret in %s or in a file "
                "named by %s" % (SECRET_ENV, path, e.strerror or e, SECRET_ENV,
                                 SECRET_FILE_ENV))
        time.sleep(0.01 * attempt)
    raise SecretError("the secret file %s keeps disappearing" % path)

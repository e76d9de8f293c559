"""A child process that dies with its parent (Linux's PR_SET_PDEATHSIG): a rank never
outlives the launcher, task or wrapper that started it.

    subprocess.Popen(argv, preexec_fn=pdeathsig_setter(signal.SIGTERM))  # in the parent
    die_with_parent(signal.SIGKILL, parent_pid)                           # in the child

Elsewhere than Linux both do nothing: the launcher's own teardown still stops the ranks.
"""

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def _prctl():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def pdeathsig_setter(signum=signal.SIGTERM):
    """A ``preexec_fn`` that asks for ``signum`` when the parent dies, or None."""
    prctl = _prctl()
    if prctl is None:
        return None
    return lambda: prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)


def die_with_parent(signum=signal.SIGTERM, parent_pid=None):
    """Ask for ``signum`` when the parent dies; exit at once if the parent (``parent_pid``)
    already went before the request took effect (the kernel would never send it)."""
    setter = pdeathsig_setter(signum)
    if setter is not None:
        setter()
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)

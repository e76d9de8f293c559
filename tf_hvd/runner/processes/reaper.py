"""Nothing the launcher started outlives it.

A rank's own children, and the helpers an MPI launcher starts (hydra's ssh to a remote
``hydra_pmi_proxy``, say), may escape the rank's process group, or be orphaned when
their parent dies. ``become_subreaper`` (Linux) makes such orphans children of the
launcher instead of init, so ``end_descendants`` finds every process of the job in the
launcher's process tree when the job is over, and ends it: SIGTERM, then SIGKILL after
a grace period. Killing an ssh client ends its session, so what it ran on the remote
host loses its connection and ends too (remote_rank.py, hydra_pmi_proxy).

    become_subreaper()
    try:
        code = run_the_job()
    finally:
        leftovers = end_descendants(grace=2.0)   # [(pid, command line)]
"""

import ctypes
import os
import signal
import time

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper():
    """Orphaned descendants become our children (Linux >= 3.4); False elsewhere."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _parents():
    """pid -> parent pid of every process we can see (/proc)."""
    parents = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return parents
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                stat = f.read()
            # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
            parents[int(name)] = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return parents


def descendants(pid=None):
    """pids of every process below ``pid`` (default: this one), parents first."""
    root = os.getpid() if pid is None else pid
    children = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    found, todo = [], list(children.get(root, []))
    while todo:
        p = todo.pop(0)
        found.append(p)
        todo.extend(children.get(p, []))
    return found


def command_line(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return "?"


def _reap():
    """Collect exited children (orphans handed to us are nobody else's to wait for)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _alive(pids):
    _reap()
    living = []
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue  # a zombie is over (its parent has yet to wait)
            living.append(pid)
        except (OSError, IndexError):
            continue
    return living


def end_descendants(grace=2.0, poll=0.05):
    """SIGTERM every descendant, SIGKILL what is left after ``grace`` seconds; returns
    [(pid, command line)] of those that were still running."""
    pids = _alive(descendants())
    found = [(pid, command_line(pid)) for pid in pids]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + (grace if sig == signal.SIGTERM else 1.0)
        while pids and time.monotonic() < deadline:
            time.sleep(poll)
            pids = _alive(pids + descendants())
        if not pids:
            break
    return found

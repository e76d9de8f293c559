"""The remote end of a rank started over ssh: ``ssh host 'cd DIR && exec env K=V ...
python remote_rank.py [--stdin-vars NAME,...] -- command ...'``.

Run by file path (stdlib only, no TensorFlow) on the remote host, it

* reads the secrets named by ``--stdin-vars`` from its standard input, one line each,
  into the command's environment (they never appear on a command line);
* runs the command in its own process group and waits for it;
* stops that group (SIGTERM, then SIGKILL after a grace period) when the ssh session
  goes away (the launcher, or its ssh client, was stopped: sshd, our parent, exits and
  we are re-parented) or when it receives SIGTERM/SIGINT/SIGHUP (forwarded), and kills
  whatever is left in the group once the command has exited, and (as the subreaper of
  the rank's process tree, reaper.py) whatever the rank started outside its group, so
  no process of the rank outlives the job on this host;
* exits with the command's code, or ``128 + N`` when the command was killed by signal N.
  (An ssh client whose remote command dies by a signal exits 255, the code it also uses
  for a failed connection; ``ssh_rank.py`` on the launcher's side turns 128 + N back
  into "killed by signal N".)

Example (what plan.py builds): ``python remote_rank.py --stdin-vars SECRET -- python
train.py``.
"""

import os
import signal
import subprocess
import sys
import threading
import time

if __package__:
    from . import reaper
else:  # run as a script: sys.path[0] is this directory
    import reaper  # noqa: E402

GRACE_S = 3.0
POLL_S = 0.1


def _parse(argv):
    stdin_vars = []
    if argv[:1] == ["--stdin-vars"] and len(argv) > 1:
        stdin_vars = [v for v in argv[1].split(",") if v]
        argv = argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    return stdin_vars, argv


def _killpg(pgid, signum):
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _stop_group(child, first_signal=signal.SIGTERM):
    _killpg(child.pid, first_signal)
    deadline = time.monotonic() + GRACE_S
    while child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    _killpg(child.pid, signal.SIGKILL)


def main(argv=None):
    stdin_vars, command = _parse(sys.argv[1:] if argv is None else argv)
    if not command:
        sys.stderr.write("remote_rank.py: no command\n")
        return 2
    env = dict(os.environ)
    for name in stdin_vars:
        line = sys.stdin.readline()
        if not line.endswith("\n"):
            sys.stderr.write("remote_rank.py: expected the value of %s on stdin\n" % name)
            return 2
        env[name] = line[:-1]
    parent = os.getppid()
    reaper.become_subreaper()
    try:
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, env=env,
                                 start_new_session=True)
    except OSError as e:
        sys.stderr.write("cannot run %r on this host: %s\n" % (command[0], e.strerror or e))
        return 127
    received = []

    def on_signal(signum, frame):
        received.append(signum)
        _killpg(child.pid, signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    # A thread blocks in wait(): the exit is reported the moment it happens (the
    # launcher compares exit times to name the rank that failed first).
    done = threading.Event()
    threading.Thread(target=lambda: (child.wait(), done.set()), daemon=True).start()
    while not done.wait(POLL_S):
        if os.getppid() != parent:  # the ssh session is gone: nobody waits for us
            _stop_group(child)
            break
        if len(received) > 1:  # a second signal: no more grace
            _killpg(child.pid, signal.SIGKILL)
    done.wait()
    code = child.returncode
    _killpg(child.pid, signal.SIGKILL)  # what the command left behind in its group
    reaper.end_descendants(grace=1.0)  # and outside it (setsid, double fork)
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main())

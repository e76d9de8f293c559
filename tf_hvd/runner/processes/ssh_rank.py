"""The launcher's end of a rank started over ssh: ``python ssh_rank.py HOST -- ssh ...``.

Runs the ssh client (stdin, stdout and stderr passed through) and reports how the
remote rank ended in the way a local rank would:

* the remote side (remote_rank.py) exits ``128 + N`` when the rank was killed by
  signal N; this wrapper then kills itself with signal N, so the launcher reports
  "rank R (on HOST) was killed by signal N" instead of ssh's generic 255;
* 255 is ssh's own failure (connection refused or lost, authentication): one line
  naming the host is added after ssh's message;
* SIGTERM/SIGINT/SIGHUP are passed to ssh (whose end makes the remote side stop the
  rank), and ssh gets SIGTERM should this wrapper die (PR_SET_PDEATHSIG).

Run by file path (stdlib only), like rank_wrapper.py.
"""

import os
import signal
import subprocess
import sys

if __package__:
    from . import job_files
else:  # run as a script: sys.path[0] is this directory
    import job_files  # noqa: E402

SSH_FAILED = 255
# Signals a rank can be "killed by" that we can re-raise on ourselves.
_RERAISABLE = set(range(1, 32)) - {int(signal.SIGSTOP), int(signal.SIGTSTP),
                                   int(signal.SIGTTIN), int(signal.SIGTTOU),
                                   int(signal.SIGCHLD), int(signal.SIGCONT),
                                   int(signal.SIGURG), int(signal.SIGWINCH)}


def signal_of(code):
    """N if ``code`` is remote_rank.py's 128 + N for a re-raisable signal, else None."""
    if code != SSH_FAILED and 128 < code < 160 and code - 128 in _RERAISABLE:
        return code - 128
    return None


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    host, command = argv[0], argv[1:]
    if command[:1] == ["--"]:
        command = command[1:]
    try:
        ssh = subprocess.Popen(
            command, preexec_fn=job_files.load("parent_death").pdeathsig_setter(signal.SIGTERM))
    except OSError as e:
        sys.stderr.write("cannot run %s: %s\n" % (command[0], e.strerror or e))
        return 127

    received = []

    def forward(signum, frame):
        received.append(signum)
        try:
            ssh.send_signal(signum)
        except OSError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    code = ssh.wait()
    if signal_of(code) is not None:
        # remote_rank.py's report of how the rank ended: the truth even if the launcher
        # also stopped us meanwhile (a rank SIGKILLed on its host stays "killed by 9")
        signum = signal_of(code)
    elif received:  # stopped by the launcher: end the way we were told to
        signum = received[0]
    elif code < 0:
        signum = -code
    else:
        signum = None
    if code == SSH_FAILED and not received:
        sys.stderr.write("ssh to %s failed (exit 255): the connection could not be made or "
                         "was lost (ssh's message, if any, is above)\n" % host)
        sys.stderr.flush()
    if signum is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        if signum not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    return code


if __name__ == "__main__":
    sys.exit(main())

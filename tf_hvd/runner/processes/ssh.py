"""Starting ranks on remote hosts over ssh, and checking that the hosts can be reached.

A remote rank is started as (see plan.rank_argv)::

    python ssh_rank.py HOST -- ssh -o BatchMode=yes [-p PORT] [-i KEY] HOST \
        'cd <cwd> && exec env K=V ... python remote_rank.py --stdin-vars SECRET -- <command>'

* BatchMode makes ssh fail at once instead of prompting for a password.
* The remote shell changes to the launcher's working directory (shared file systems are
  assumed, as with horovodrun: the same Python, tree and venv at the same paths) and
  runs the command under remote_rank.py with the rank's variables set by ``env``.
* Secrets (the rendezvous secret) never go on a command line, where every user of
  either machine could read them in ``ps``: remote_rank.py reads them from ssh's
  standard input, one line each, in the order given; the launcher writes those lines.
* remote_rank.py stops the rank's whole process group when the ssh session ends (the
  launcher stopped the job, or died), so no process survives on the remote host, and
  reports a rank killed by signal N as 128 + N, which ssh_rank.py on this side turns
  back into "killed by signal N" (ssh itself exits 255 for that, as for a failed
  connection).

``check_hosts`` runs ``ssh HOST true`` on every host first, so an unreachable host or
an ssh failure is reported at start-up with ssh's own message.
"""

import os
import shlex
import subprocess
import sys
import threading

_HERE = os.path.dirname(os.path.abspath(__file__))
REMOTE_WRAPPER = os.path.join(_HERE, "remote_rank.py")
LOCAL_WRAPPER = os.path.join(_HERE, "ssh_rank.py")
CHECK_TIMEOUT_S = 30


def remote_shell_command(command, env, cwd, stdin_vars=(), python=None):
    """The string the remote shell runs.

    ``stdin_vars``: names of variables whose values arrive as lines on stdin.
    ``python``: the interpreter that runs remote_rank.py there (default: ours).
    """
    assignments = " ".join(shlex.quote("%s=%s" % (k, env[k])) for k in sorted(env))
    parts = ["cd", shlex.quote(cwd), "&&", "exec", "env"]
    if assignments:
        parts.append(assignments)
    parts += [shlex.quote(python or sys.executable), shlex.quote(REMOTE_WRAPPER)]
    if stdin_vars:
        parts += ["--stdin-vars", shlex.quote(",".join(stdin_vars))]
    parts.append("--")
    parts += [shlex.quote(a) for a in command]
    return " ".join(parts)


def ssh_base(host, ssh_port=None, identity_file=None):
    """``ssh -o BatchMode=yes [-p PORT] [-i KEY] HOST`` as a list."""
    argv = ["ssh", "-o", "BatchMode=yes"]
    if ssh_port is not None:
        argv += ["-p", str(ssh_port)]
    if identity_file is not None:
        argv += ["-i", identity_file]
    return argv + [host]


def ssh_command(host, command, env, cwd, ssh_port=None, identity_file=None, stdin_vars=()):
    """argv list for subprocess: run ``command`` (a list) on ``host`` under ssh."""
    return ssh_base(host, ssh_port, identity_file) + [
        remote_shell_command(command, env, cwd, stdin_vars)]


def rank_command(host, ssh_argv):
    """The launcher-side argv of a remote rank: ssh under ssh_rank.py."""
    return [sys.executable, LOCAL_WRAPPER, host, "--"] + list(ssh_argv)


def check_hosts(hosts, ssh_port=None, identity_file=None, timeout=CHECK_TIMEOUT_S):
    """Runs ``ssh HOST true`` on every host at once; returns [(host, message)] for the
    hosts that failed (ssh's own message, or a time-out), in the order given."""
    results = {}

    def probe(host):
        argv = ssh_base(host, ssh_port, identity_file)
        argv[3:3] = ["-o", "ConnectTimeout=%d" % max(1, int(timeout) - 2)]
        try:
            res = subprocess.run(argv + ["true"], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 timeout=timeout)
        except subprocess.TimeoutExpired:
            results[host] = "no answer within %d s" % timeout
            return
        except OSError as e:
            results[host] = "cannot run ssh: %s" % (e.strerror or e)
            return
        if res.returncode != 0:
            text = res.stderr.decode("utf-8", "replace").strip().splitlines()
            results[host] = "%s (ssh exit %d)" % (
                text[-1] if text else "no message", res.returncode)

    threads = [threading.Thread(target=probe, args=(h,), daemon=True) for h in hosts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 5)
    return [(h, results[h]) for h in hosts if h in results]

"""The ssh command line that starts one rank on a remote host.

``ssh -o BatchMode=yes [-p PORT] [-i KEY] host 'cd <cwd> && env K=V ... <command>'``

BatchMode makes ssh fail at once instead of prompting for a password. The remote
shell changes to the launcher's working directory (shared file systems are assumed,
as with horovodrun) and runs the command with the rank's variables set by ``env``.
Everything is quoted for a POSIX shell.

Secrets (the rendezvous secret) never go on a command line, where every user of
either machine could read them in ``ps``: the remote shell reads them from ssh's
standard input (``IFS= read -r NAME``, one line each, in the order given) and exports
them before starting the command; the launcher writes those lines to ssh's stdin.

Note: terminating the local ssh client does not always stop the remote process; the
ranks' own transport errors (a peer vanished) end them in that case.
"""

import shlex


def remote_shell_command(command, env, cwd, stdin_vars=()):
    """The string the remote shell runs.

    ``stdin_vars``: names of variables whose values arrive as lines on stdin.
    """
    assignments = " ".join(shlex.quote("%s=%s" % (k, env[k])) for k in sorted(env))
    argv = " ".join(shlex.quote(a) for a in command)
    parts = []
    for name in stdin_vars:
        parts += ["IFS=", "read", "-r", name, "&&", "export", name, "&&"]
    parts += ["cd", shlex.quote(cwd), "&&", "env"]
    if assignments:
        parts.append(assignments)
    parts.append(argv)
    return " ".join(parts)


def ssh_command(host, command, env, cwd, ssh_port=None, identity_file=None, stdin_vars=()):
    """argv list for subprocess: run ``command`` (a list) on ``host``."""
    argv = ["ssh", "-o", "BatchMode=yes"]
    if ssh_port is not None:
        argv += ["-p", str(ssh_port)]
    if identity_file is not None:
        argv += ["-i", identity_file]
    argv += [host, remote_shell_command(command, env, cwd, stdin_vars)]
    return argv

"""Building the mpiexec command for ``tfhvdrun --mpi``.

mpiexec is taken from the directory of the running Python (a venv with the ``mpich``
wheel ships it there) and otherwise from PATH. MPICH/Hydra and Open MPI spell the
host list and environment options differently; ``mpi_flavor`` tells them apart.

Every rank runs ``python rank_wrapper.py ... -- command``: the wrapper prefixes the
rank's output lines and reports its exit status to the launcher (see rank_wrapper.py),
which mpiexec alone does not do line by line.
"""

import os
import shlex
import shutil
import subprocess
import sys

HYDRA = "hydra"
OPENMPI = "openmpi"

# run by path (it imports only its neighbours in processes/, never the package)
WRAPPER_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "processes", "rank_wrapper.py")


def find_mpiexec(bin_dir=None, path=None):
    """Absolute path of mpiexec, or None.

    ``bin_dir`` defaults to the directory of sys.executable, ``path`` to $PATH.
    """
    if bin_dir is None:
        bin_dir = os.path.dirname(sys.executable)
    candidate = os.path.join(bin_dir, "mpiexec")
    if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
        return candidate
    if path is None:
        path = os.environ.get("PATH", os.defpath)
    return shutil.which("mpiexec", path=path)


def mpi_flavor(mpiexec, cache=None):
    """HYDRA (MPICH, Intel MPI) or OPENMPI, from ``mpiexec --version``.

    ``cache`` (cache.LauncherCache) remembers the answer for this mpiexec file."""
    if cache is not None:
        try:
            st = os.stat(mpiexec)
            key = ["mpi_flavor", os.path.realpath(mpiexec), st.st_mtime_ns, st.st_size]
        except OSError:
            key = None
        if key is not None:
            return cache.get_or_compute(key, lambda: _detect_flavor(mpiexec))
    return _detect_flavor(mpiexec)


def _detect_flavor(mpiexec):
    try:
        out = subprocess.run([mpiexec, "--version"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return HYDRA
    text = out.decode("utf-8", "replace")
    if "Open MPI" in text or "OpenRTE" in text or "open-mpi" in text:
        return OPENMPI
    return HYDRA


def ssh_launcher_script(directory, ssh_args):
    """Writes ``directory/ssh`` running ``ssh <ssh_args> "$@"`` (for hydra's
    -launcher-exec, which takes a program, not arguments); returns its path."""
    path = os.path.join(directory, "ssh")
    with open(path, "w") as f:
        f.write("#!/bin/sh\nexec ssh %s \"$@\"\n" % " ".join(shlex.quote(a) for a in ssh_args))
    os.chmod(path, 0o700)
    return path


def mpiexec_command(mpiexec, flavor, num_proc, hosts_arg, env, command,
                    output_dir=None, status_dir=None, python=None, mpi_args=None,
                    binding_args=None, prefix_timestamp=False, ssh_args=(), nics=None):
    """argv for subprocess.

    ``hosts_arg`` is ``"h1:2,h2:2"`` or None (all ranks local: let mpiexec place
    them). ``env`` are the variables every rank gets, passed explicitly so remote
    ranks receive them too. ``ssh_args`` (``-p PORT``, ``-i KEY``) reach mpiexec's ssh
    launcher. ``binding_args`` (a string, --binding-args) replaces the
    default binding (Open MPI: ``-bind-to none -map-by slot``, as horovodrun; Hydra:
    none); ``mpi_args`` (--mpi-args) go last, just before the program. ``nics``
    (--network-interfaces) restrict MPI's own TCP traffic, as horovodrun passes them:
    Open MPI's btl_tcp_if_include and oob_tcp_if_include, Hydra's -iface (its first:
    the address its proxies call back on).
    """
    argv = [mpiexec, "-n", str(num_proc)]
    if flavor == OPENMPI:
        if hosts_arg:
            argv += ["-H", hosts_arg]
        if hosts_arg and ssh_args:
            argv += ["-mca", "plm_rsh_args", " ".join(ssh_args)]
        if nics:
            argv += ["-mca", "btl_tcp_if_include", ",".join(nics),
                     "-mca", "oob_tcp_if_include", ",".join(nics)]
        for name in sorted(env):
            argv += ["-x", "%s=%s" % (name, env[name])]
    else:
        if hosts_arg:
            argv += ["-hosts", hosts_arg]
        if hosts_arg and ssh_args and status_dir:
            argv += ["-launcher", "ssh", "-launcher-exec",
                     ssh_launcher_script(status_dir, ssh_args)]
        if nics:
            argv += ["-iface", nics[0]]
        for name in sorted(env):
            argv += ["-genv", name, env[name]]
    if binding_args is not None:
        argv += shlex.split(binding_args)
    elif flavor == OPENMPI:
        argv += ["-bind-to", "none", "-map-by", "slot"]
    if mpi_args:
        argv += shlex.split(mpi_args)
    return argv + wrapped_command(command, num_proc, output_dir, status_dir,
                                  prefix_timestamp, python)


def wrapped_command(command, num_proc, output_dir=None, status_dir=None,
                    prefix_timestamp=False, python=None):
    """``python rank_wrapper.py [options] -- command``: what an MPI launcher starts on
    every rank (mpiexec, jsrun)."""
    argv = [python or sys.executable, WRAPPER_PATH]
    if output_dir:
        argv += ["--output-filename", output_dir, "--num-ranks", str(num_proc)]
    if status_dir:
        argv += ["--status-dir", status_dir]
    if prefix_timestamp:
        argv += ["--prefix-timestamp"]
    return argv + ["--"] + list(command)

"""The Python launch API, Horovod's ``horovod.run``: run a function on every rank and
get each rank's return value.

    import tf_hvd.runner          # or: import tf_hvd; tf_hvd.run(...)

    def train(lr):
        import tf_hvd as hvd
        hvd.init()
        return hvd.rank(), lr * hvd.size()

    tf_hvd.runner.run(train, args=(0.1,), np=2)              # [(0, 0.2), (1, 0.2)]
    tf_hvd.runner.run(train, kwargs={"lr": 1}, np=2, use_mpi=True)

The function, its arguments and the results are serialized with cloudpickle (pinned in
tools/requirements.txt; plain pickle when it is missing, which needs ``fn`` importable
by name on the ranks). The job is started by ``tfhvdrun`` itself (the same checks,
rank-prefixed output and failure reports); its ranks run ``tf_hvd.runner.run_task``.
The exchange goes through a private directory: a temporary one when every rank runs on
this machine, else one under the working directory, which (as for tfhvdrun's ranks)
must be on a file system every host shares.

The parameters are horovod.run's (Horovod 0.28.1), in its order, so positional calls
mean the same; ``network_interfaces`` (list or comma-separated string) is the current
spelling, ``network_interface`` the deprecated one; both may be given, as in Horovod.
A failed job raises as every launcher does (tf_hvd.job.failure_report): the exception
type the root-cause rank raised, else HorovodInternalError, with tfhvdrun's line as its
message ("rank 1 (on localhost, pid 4242) raised KeyError: 'k'; rank 0 stopped in
consequence": what the rank raised in place of tfhvdrun's "exited ... after raising"),
the rank's traceback as the cause; RuntimeError naming tfhvdrun's exit code where the
job failed before any rank did. Differences from Horovod: elastic parameters
(min_num_proc, max_num_proc, slots, reset_limit, cooldown_range, host_discovery_script)
need tfhvdrun's elastic flags and raise ValueError while this tfhvdrun lacks them.
"""

import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import warnings

from ..exceptions import HorovodInternalError
from ..job import failure_report, rank_env, rank_function
from ..job.rank_names import rank_of, with_how
from .serialization import serializer
from .command_line.parser import build_parser


def _flag_exists(option):
    return any(option in a.option_strings for a in build_parser()._actions)


def _interfaces(value):
    """A list/tuple/set of names or a comma-separated string -> [names]."""
    if value is None:
        return []
    if isinstance(value, str):
        value = value.split(",")
    return [name.strip() for name in value if name.strip()]


def _launcher_argv(num_proc, options):
    argv = ["-np", str(num_proc)]
    for option, value in options:
        if value is None or value is False:
            continue
        if not _flag_exists(option):
            raise ValueError("tf_hvd.runner.run: %s needs tfhvdrun's %s, which this "
                             "version does not have" % (option.lstrip("-"), option))
        if value is True:
            argv.append(option)
        elif isinstance(value, (list, tuple)):
            argv += [option] + [str(v) for v in value]
        else:
            # --opt=value, so that a value starting with '-' (--mpi-args) is not a flag
            argv.append("%s=%s" % (option, value))
    return argv


def _job_error(directory, code):
    """The error of a failed job: tfhvdrun's line, with the root rank's own exception type
    where its function raised (DIR/error.<rank>), else HorovodInternalError."""
    try:
        with open(os.path.join(directory, "report")) as f:
            line = f.read().strip()
    except OSError:
        line = ""
    root = rank_of(line)
    if root is None:
        return RuntimeError("tf_hvd.runner.run: the job failed (tfhvdrun exit code %d; "
                            "its report above names the rank)" % code)
    raised = None
    try:
        with open(os.path.join(directory, "error.%d" % root), "rb") as f:
            raised = rank_function.read_raised(f.read())
    except OSError:
        pass
    if raised is not None:  # what it raised, as the other function launchers say it
        line = with_how(line, failure_report.how(failure_report.RankEnd(root, raised=raised)))
    return failure_report.error_for(raised, line, HorovodInternalError)


def run(func, args=(), kwargs=None, num_proc=1, min_num_proc=None, max_num_proc=None,
        slots=None, reset_limit=None, cooldown_range=None, hosts=None, hostfile=None,
        host_discovery_script=None, start_timeout=None, ssh_port=None,
        ssh_identity_file=None, disable_cache=None, output_filename=None, verbose=None,
        use_gloo=None, use_mpi=None, mpi_args=None, network_interface=None,
        network_interfaces=None, executable=None, np=None, min_np=None, max_np=None):
    """Runs ``func(*args, **kwargs)`` on every rank of a job; returns the list of their
    return values, index == rank. Parameters as horovod.run (np, min_np and max_np are
    the deprecated spellings of num_proc, min_num_proc and max_num_proc; network_interface
    of network_interfaces).

    Example::

        def square_of_rank():
            import os
            return int(os.environ["HOROVOD_RANK"]) ** 2

        tf_hvd.run(square_of_rank, num_proc=3)            # [0, 1, 4]

    Raises ValueError for contradictory arguments and RuntimeError when the job fails.
    """
    if np is not None:
        if num_proc == 1:
            num_proc = np
        warnings.warn("np is deprecated, use num_proc instead", DeprecationWarning)
    if min_np is not None:
        min_num_proc = min_num_proc if min_num_proc is not None else min_np
        warnings.warn("min_np is deprecated, use min_num_proc instead", DeprecationWarning)
    if max_np is not None:
        max_num_proc = max_num_proc if max_num_proc is not None else max_np
        warnings.warn("max_np is deprecated, use max_num_proc instead", DeprecationWarning)
    if hosts is not None and hostfile is not None:
        raise ValueError("give hosts or hostfile, not both")
    if use_gloo and use_mpi:
        raise ValueError("give use_gloo or use_mpi, not both")
    kwargs = {} if kwargs is None else dict(kwargs)
    if network_interface is not None:
        warnings.warn("network_interface is deprecated, use network_interfaces instead",
                      DeprecationWarning)
    nics = []
    for name in _interfaces(network_interfaces) + _interfaces(network_interface):
        if name not in nics:
            nics.append(name)
    options = [
        ("--min-np", min_num_proc), ("--max-np", max_num_proc),
        ("--slots-per-host", slots), ("--reset-limit", reset_limit),
        ("--blacklist-cooldown-range", cooldown_range),
        ("--hosts", hosts), ("--hostfile", hostfile),
        ("--host-discovery-script", host_discovery_script), ("--start-timeout", start_timeout),
        ("--ssh-port", ssh_port), ("--ssh-identity-file", ssh_identity_file),
        ("--disable-cache", bool(disable_cache)), ("--output-filename", output_filename),
        ("--verbose", bool(verbose)), ("--gloo", bool(use_gloo)), ("--mpi", bool(use_mpi)),
        ("--mpi-args", mpi_args), ("--network-interfaces", ",".join(nics) or None),
    ]
    launcher_args = _launcher_argv(num_proc, options)

    local = hosts is None and hostfile is None
    directory = tempfile.mkdtemp(prefix=".tf_hvd_run.", dir=None if local else os.getcwd())
    try:
        with open(os.path.join(directory, "payload"), "wb") as f:
            pickle.dump(list(sys.path), f)
            serializer().dump((func, tuple(args), kwargs), f)
        command = [executable or sys.executable, "-m", "tf_hvd.runner.run_task", directory]
        env = dict(os.environ)
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))))
        env["PYTHONPATH"] = os.pathsep.join(
            [package_root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        env[rank_env.RUN_REPORT_FILE] = os.path.join(directory, "report")
        code = subprocess.call([sys.executable, "-m", "tf_hvd.runner"] + launcher_args +
                               command, env=env)
        if code != 0:
            raise _job_error(directory, code)
        results = []
        for rank in range(num_proc):
            path = os.path.join(directory, "result.%d" % rank)
            if not os.path.exists(path):
                raise RuntimeError("tf_hvd.runner.run: rank %d returned no result" % rank)
            with open(path, "rb") as f:
                results.append(pickle.load(f))
        return results
    finally:
        shutil.rmtree(directory, ignore_errors=True)

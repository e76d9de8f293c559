"""Per-rank wrapper used by ``tfhvdrun --mpi``: mpiexec starts this, this starts the
user's command.

    python rank_wrapper.py [--output-filename DIR] [--status-dir DIR] -- command ...

It runs the command as its child in the same process group (mpiexec signals whole
process groups, so both are stopped together), with everything inherited, including
the file descriptors the MPI process manager passes (PMI_FD), and

* copies the child's stdout/stderr to its own, each line prefixed ``[rank]<stdout>:``
  (rank from PMI_RANK / OMPI_COMM_WORLD_RANK / PMIX_RANK), optionally also to
  DIR/rank.<r>/{stdout,stderr};
* writes ``<status-dir>/rank.<r>.pgid`` at start, ``rank.<r>.traceback`` when the
  command first prints a Python traceback on stderr, and ``rank.<r>.exit`` (the exit
  code, negative for a signal) at the end, and has the rank's core write
  ``rank.<r>.fault`` (TF_HVD_FAULT_FILE: which rank made it stop, the report Gloo
  ranks put in the store), so the launcher learns which rank failed first (the files'
  modification times say when; see failures.py) and can clean up every rank's process
  group;
* ends, once the command has exited, whatever it started that is still running on this
  host (reaper.py: the wrapper is the subreaper of the rank's process tree).

It is run by file path, not ``-m``, so starting it never imports the tf_hvd package
(and with it TensorFlow); it needs only the standard library and output.py and
reaper.py next to it.
"""

import argparse
import os
import signal
import subprocess
import sys
import time

if __package__:
    from . import output
    from . import reaper
else:  # run as a script: sys.path[0] is this directory
    import output  # noqa: E402
    import reaper  # noqa: E402

# Same text as failures.TRACEBACK_LINE (this file must not import the package).
TRACEBACK_LINE = b"Traceback (most recent call last):"

# Same texts as tf_hvd.job.rank_env.QUIET_TF_STARTUP and FAULT_FILE (this file must not
# import the package; tests/unit/test_job_contract.py checks that they agree).
QUIET_ENV = "TF_HVD_QUIET_TF_STARTUP"
FAULT_FILE_ENV = "TF_HVD_FAULT_FILE"

_RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "JSM_NAMESPACE_RANK",
              "HOROVOD_RANK")


def rank_from_env(environ):
    for name in _RANK_VARS:
        value = environ.get(name)
        if value is not None and value.strip().lstrip("-").isdigit():
            return int(value)
    return 0


def _write_atomically(path, text):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _report_exit(status_dir, rank, code):
    if status_dir:
        try:
            _write_atomically(os.path.join(status_dir, "rank.%d.exit" % rank), "%d\n" % code)
        except OSError:
            pass


def main(argv=None):
    parser = argparse.ArgumentParser(prog="tf_hvd rank wrapper")
    parser.add_argument("--output-filename", dest="output_dir")
    parser.add_argument("--status-dir", dest="status_dir")
    parser.add_argument("--prefix-timestamp", dest="prefix_timestamp", action="store_true")
    parser.add_argument("--num-ranks", dest="num_ranks", type=int, default=1,
                        help="the job's size: pads the rank in --output-filename folders")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command")
    rank = rank_from_env(os.environ)
    output.set_timestamps(args.prefix_timestamp)
    output.set_rank_count(args.num_ranks)
    output.set_quiet(os.environ.get(QUIET_ENV) == "1")
    status_dir = args.status_dir
    if status_dir and not os.path.isdir(status_dir):
        status_dir = None  # a remote host: the launcher's directory is not here

    if status_dir:
        _write_atomically(os.path.join(status_dir, "rank.%d.pgid" % rank),
                          "%d\n" % os.getpgid(0))

    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    if status_dir:  # the core writes its fault report here (failures.py reads it)
        env[FAULT_FILE_ENV] = os.path.join(status_dir, "rank.%d.fault" % rank)
    # SIGTERM aimed at the wrapper alone is passed on; SIGINT normally reaches the whole
    # process group (terminal, mpiexec), so the wrapper ignores it and waits.
    child = None

    def on_term(signum, frame):
        if child is not None and child.poll() is None:
            try:
                child.send_signal(signum)
            except OSError:
                pass

    signal.signal(signal.SIGTERM, on_term)
    reaper.become_subreaper()  # the rank's orphans are ours to end (reaper.py)
    try:
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, env=env, close_fds=False,
                                 restore_signals=True)
    except OSError as e:
        line = "%scannot run %r: %s\n" % (output.prefix(rank, "stderr").decode(),
                                           command[0], e.strerror or e)
        sys.stderr.write(line)
        sys.stderr.flush()
        _report_exit(status_dir, rank, 127)
        return 127
    # Only now: an ignored signal would be inherited by the child through exec.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    seen_traceback = []

    def on_stderr_line(line):
        if not seen_traceback and line.startswith(TRACEBACK_LINE):
            seen_traceback.append(True)
            if status_dir:
                try:
                    _write_atomically(os.path.join(status_dir, "rank.%d.traceback" % rank),
                                      "1\n")
                except OSError:
                    pass

    threads = [
        output.forward(child.stdout, rank, "stdout", sys.stdout.buffer, args.output_dir),
        output.forward(child.stderr, rank, "stderr", sys.stderr.buffer, args.output_dir,
                       on_line=on_stderr_line),
    ]
    code = child.wait()
    # Report first: the child's own children may hold its pipes open for a while.
    _report_exit(status_dir, rank, code)
    reaper.end_descendants(grace=1.0)  # nothing the rank started outlives it here
    deadline = time.monotonic() + 5.0
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return code if code >= 0 else 128 - code

if __name__ == "__main__":
    sys.exit(main())

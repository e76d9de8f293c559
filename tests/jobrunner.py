"""Starting a job from a test (the launcher, mpiexec or a plain command) with a hard
time limit, capturing its output, and never leaving a process of it behind.

Every test that starts processes goes through here:

    from jobrunner import run, tfhvdrun_cmd, base_env
    res = run(tfhvdrun_cmd(2) + [PY, "train.py"], timeout=120, env=base_env())
    assert res.ok, res.describe()
    res.returncode, res.output, res.timed_out, res.seconds, res.survivors

How it bounds a job: the command starts in its own session; while it runs, its process
tree is recorded (psutil), so ranks that outlive a launcher are still known. When the time
limit passes, the whole tree is stopped (SIGTERM, a short grace, SIGKILL, then the process
group) and the result says ``timed_out``. When the command ends by itself, processes of its
tree still running after ``grace`` seconds are reported as ``survivors`` and killed.

``Job`` is the same with the output readable while the job runs (``on_line``) and an
explicit ``wait``/``kill``; it is a context manager that never leaves the tree running.
"""

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time

import psutil

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = sys.executable

# Environment of the test process that must not leak into a job (an enclosing launcher's
# or MPI's rank variables would make the job think it is one of their ranks).
SCRUB_PREFIXES = ("HOROVOD_", "PMI_", "PMIX_", "OMPI_", "HYDRA_", "MPI_LOCALNRANKS",
                  "MPI_LOCALRANKID")

# How long a job's processes get between SIGTERM and SIGKILL.
TERM_GRACE_S = 3.0


# -- environments and commands -------------------------------------------------------------

def clean_env(extra=None, scrub=SCRUB_PREFIXES):
    """This process's environment without launcher/MPI variables inherited from an
    enclosing job, with this tree first on PYTHONPATH; nothing else added.

    >>> "HOROVOD_RANK" in clean_env()
    False
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(scrub)}
    env["PYTHONPATH"] = os.pathsep.join(
        [REPO] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != REPO])
    if extra:
        env.update(extra)
    return env


# Keras imports scikit-learn, pandas and matplotlib when it is imported, if they are
# installed (its scikit-learn wrappers, DataFrame adapter and image-gallery plot): about 3 s
# of the ~8 s of CPU that `import tensorflow` takes on this project's 2-core VM, in every
# rank of every job, for modules no rank under test uses. base_env() puts stand-ins first on
# the jobs' PYTHONPATH that raise ModuleNotFoundError, as if the three were not installed;
# a job whose ranks use them (the digits examples load their data with scikit-learn) passes
# hide_optional=False.
OPTIONAL_HIDDEN = os.path.join(REPO, "tests", "optional_hidden")


def base_env(extra=None, scrub=SCRUB_PREFIXES, hide_optional=True):
    """The environment of a job's processes: clean_env(), unbuffered output, small
    TensorFlow thread pools, Keras's optional imports hidden (OPTIONAL_HIDDEN).

    >>> base_env({"HOROVOD_CYCLE_TIME": "1"})["HOROVOD_CYCLE_TIME"]
    '1'
    """
    env = clean_env(scrub=scrub)
    if hide_optional:
        paths = env["PYTHONPATH"].split(os.pathsep)
        env["PYTHONPATH"] = os.pathsep.join(paths[:1] + [OPTIONAL_HIDDEN] + paths[1:])
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["PYTHONUNBUFFERED"] = "1"
    # Two cores are shared by all ranks: keep TensorFlow's own thread pools small.
    env.setdefault("TF_NUM_INTRAOP_THREADS", "1")
    env.setdefault("OMP_NUM_THREADS", "1")
    if extra:
        env.update(extra)
    return env


def job_env(extra=None):
    """base_env() plus stall limits that fail a missing collective well before a job's
    hard time limit, naming the tensor and the missing ranks."""
    env = base_env()
    env.setdefault("HOROVOD_STALL_CHECK_TIME_SECONDS", "20")
    env.setdefault("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "90")
    if extra:
        env.update(extra)
    return env


def mpiexec_path():
    """The venv's mpiexec (the mpich wheel), else the one on PATH."""
    candidate = os.path.join(os.path.dirname(PYTHON), "mpiexec")
    if os.access(candidate, os.X_OK):
        return candidate
    found = shutil.which("mpiexec")
    if not found:
        raise RuntimeError("mpiexec not found next to %s nor on PATH" % PYTHON)
    return found


def tfhvdrun_cmd(np_, mpi=False, launcher_args=()):
    """``python -m tf_hvd.runner -np N [--mpi] [launcher_args]``: append the program."""
    cmd = [PYTHON, "-m", "tf_hvd.runner", "-np", str(np_)]
    if mpi:
        cmd.append("--mpi")
    return cmd + [str(a) for a in launcher_args]


def mpiexec_cmd(np_):
    """``mpiexec -n N``: append the program."""
    return [mpiexec_path(), "-n", str(np_)]


# -- processes -----------------------------------------------------------------------------

def alive(proc):
    """True if the psutil.Process (or pid) still runs and is not a zombie."""
    try:
        if not isinstance(proc, psutil.Process):
            proc = psutil.Process(proc)
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def stop(procs, grace=TERM_GRACE_S):
    """SIGTERM every live process of ``procs`` (psutil.Process or pids), wait up to
    ``grace`` s, then SIGKILL what is left. Returns the processes that had to be killed."""
    live = []
    for p in procs:
        try:
            p = p if isinstance(p, psutil.Process) else psutil.Process(p)
        except psutil.NoSuchProcess:
            continue
        if alive(p):
            live.append(p)
    for p in live:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    _, left = psutil.wait_procs(live, timeout=grace)
    for p in left:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(left, timeout=grace)
    return left


def kill_tree(pid, grace=TERM_GRACE_S):
    """Stops ``pid`` and all its descendants (a Popen is accepted too), then its process
    group (a job started here is its own group), so nothing of it keeps running."""
    pid = getattr(pid, "pid", pid)
    try:
        root = psutil.Process(pid)
        procs = root.children(recursive=True) + [root]
    except psutil.NoSuchProcess:
        procs = []
    stop(procs, grace)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def wait_gone(pids, within=5.0):
    """Waits up to ``within`` s for the processes ``pids`` to end by themselves; kills and
    returns those still running (so a failing test leaves nothing behind)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    survivors = [p for p in pids if alive(p)]
    stop(survivors, grace=1.0)
    return [getattr(p, "pid", p) for p in survivors]


class JobResult(object):
    """What a job did. ``returncode`` is None when it was killed at its time limit.

    ``stdout``/``stderr`` are bytes as the job wrote them (stderr is b"" when it was merged
    into stdout); ``output`` is stdout decoded (merged with stderr by default)."""

    def __init__(self, cmd, returncode, stdout, stderr, timed_out, seconds, survivors,
                 timeout):
        self.cmd = list(cmd)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.timed_out = timed_out
        self.seconds = seconds
        self.survivors = survivors
        self.timeout = timeout

    @property
    def output(self):
        return self.stdout.decode("utf-8", "replace")

    @property
    def ok(self):
        return self.returncode == 0 and not self.timed_out

    def describe(self, lines=120, text=None):
        """Command, how it ended, and the last ``lines`` lines of output (or ``text``)."""
        if self.timed_out:
            how = "killed at its time limit of %g s (hang?)" % self.timeout
        else:
            how = "exit code %s after %.1f s" % (self.returncode, self.seconds)
        if self.survivors:
            how += "; processes outlived it: %r" % self.survivors
        body = text if text is not None else "\n".join(
            (self.output + self.stderr.decode("utf-8", "replace")).splitlines()[-lines:])
        return "command: %s\n%s\n--- output ---\n%s" % (" ".join(self.cmd), how, body)

    def check_finished(self):
        """Raises AssertionError (with the output) if the job hit its time limit."""
        if self.timed_out:
            raise AssertionError(self.describe())
        return self


class Job(object):
    """A running job: its own session, its output captured (and teed to ``log_path``),
    its process tree recorded while it runs.

    >>> with Job([PYTHON, "-c", "print('hi')"]) as job:
    ...     res = job.wait(timeout=30)
    >>> res.output
    'hi\\n'
    """

    def __init__(self, cmd, env=None, cwd=None, log_path=None, merge_stderr=True,
                 on_line=None, grace=5.0, input=None):
        self.cmd = [str(c) for c in cmd]
        self.grace = grace
        self._on_line = on_line
        self._chunks = {"stdout": [], "stderr": []}
        self._log = open(log_path, "wb") if log_path else None
        self._log_lock = threading.Lock()
        self._known = {}
        self._start = time.monotonic()
        self.proc = subprocess.Popen(
            self.cmd, cwd=cwd or REPO, env=env if env is not None else base_env(),
            stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
            start_new_session=True)
        self.pid = self.proc.pid
        self._readers = [threading.Thread(target=self._read, args=(self.proc.stdout, "stdout"),
                                          daemon=True)]
        if not merge_stderr:
            self._readers.append(threading.Thread(target=self._read,
                                                  args=(self.proc.stderr, "stderr"),
                                                  daemon=True))
        if input is not None:
            self._readers.append(threading.Thread(target=self._feed, args=(input,),
                                                  daemon=True))
        for t in self._readers:
            t.start()
        self.result = None
        # Records the tree while the command runs: once it ends, its children are
        # re-parented and could no longer be found from its pid.
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()

    def _read(self, pipe, name):
        for line in iter(pipe.readline, b""):
            self._chunks[name].append(line)
            if self._log:
                with self._log_lock:
                    self._log.write(line)
                    self._log.flush()
            if self._on_line:
                self._on_line(name, line.decode("utf-8", "replace").rstrip("\n"))
        pipe.close()

    def _feed(self, data):
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.close()
        except OSError:  # the job ended without reading it all
            pass

    def _watch(self):
        while self.proc.poll() is None:
            self._record_tree()
            time.sleep(0.25)

    def _record_tree(self):
        try:
            for p in psutil.Process(self.pid).children(recursive=True):
                self._known.setdefault(p.pid, p)
        except psutil.NoSuchProcess:
            pass

    def _record_group(self):
        # What the command started and left behind inside its own process group, even
        # if it lived too briefly under it to be seen by the watcher.
        for p in psutil.process_iter():
            try:
                if p.pid != self.pid and os.getpgid(p.pid) == self.pid:
                    self._known.setdefault(p.pid, p)
            except (ProcessLookupError, PermissionError, psutil.Error):
                pass

    def running(self):
        return self.proc.poll() is None

    def kill(self):
        """Stops the job's whole tree now (also what it started that left the tree)."""
        self._record_tree()
        stop(list(self._known.values()) + [self.pid])
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def wait(self, timeout):
        """Waits for the job, at most ``timeout`` s from now (then stops its whole tree);
        returns its JobResult."""
        if self.result is not None:
            return self.result
        timed_out = False
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            self.kill()
            self.proc.wait()
        self._watcher.join()
        self._record_group()
        seconds = time.monotonic() - self._start
        survivors = wait_gone(list(self._known.values()), within=0 if timed_out else self.grace)
        if survivors:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for t in self._readers:
            t.join(10)
        if self._log:
            self._log.close()
        self.result = JobResult(self.cmd, None if timed_out else self.proc.returncode,
                                b"".join(self._chunks["stdout"]),
                                b"".join(self._chunks["stderr"]), timed_out, seconds,
                                [] if timed_out else survivors, timeout)
        return self.result

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.result is None:
            if self.running():
                self.kill()
            self.wait(timeout=0)
        return False


def run(cmd, timeout, env=None, cwd=None, log_path=None, merge_stderr=True, grace=5.0,
        input=None):
    """Runs ``cmd`` to its end or its hard time limit; returns its JobResult.

    >>> run([PYTHON, "-c", "import sys; sys.exit(3)"], timeout=30).returncode
    3
    """
    with Job(cmd, env=env, cwd=cwd, log_path=log_path, merge_stderr=merge_stderr,
             grace=grace, input=input) as job:
        return job.wait(timeout)


def run_python(*pieces, timeout=180, env=None, drop=()):
    """Runs the dedented code ``pieces`` in a fresh ``python -c`` (clean_env() plus
    ``env``, without the variables named in ``drop``) from the repository root; asserts it
    succeeded within ``timeout`` s and returns its output (stdout and stderr).

    >>> run_python("print(6 * 7)", timeout=60)
    '42\\n'
    """
    code = "\n".join(textwrap.dedent(p) for p in pieces)
    job_environment = {k: v for k, v in clean_env().items() if k not in drop}
    job_environment.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    job_environment.update(env or {})
    res = run([PYTHON, "-c", code], timeout, env=job_environment)
    assert res.ok, res.describe(text=res.output[-6000:])
    return res.output

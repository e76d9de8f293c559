"""Starting a multi-process worker job from a test, with a hard time limit.

``run_job(np, transport, script, ...)`` starts ``script`` on ``np`` ranks:
* transport "gloo": ``python -m tf_hvd.runner -np N python script ...``
* transport "mpi":  ``<venv>/bin/mpiexec -n N python script ...`` (the core picks
  MPI from the PMI_* variables mpiexec sets)
and returns (returncode, output). A job that exceeds ``timeout`` is killed
(every process it started) and reported as a failure, so a hang fails the test
instead of blocking the suite.

Workers get ``--np N --transport T --result-dir DIR`` and leave ``rank<r>.ok``
(or ``rank<r>.fail``) in DIR; ``assert_job_ok`` checks the exit code, that every
rank wrote ``.ok``, and that the output has an ``OK <n> checks`` line per rank.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKERS = os.path.join(REPO, "tests", "parallel", "workers")
PYTHON = sys.executable

# Environment of the test process that must not leak into a job.
_SCRUB_PREFIXES = ("HOROVOD_", "PMI_", "PMIX_", "OMPI_", "MPI_LOCALNRANKS", "MPI_LOCALRANKID",
                   "HYDRA_")


def mpiexec_path():
    candidate = os.path.join(os.path.dirname(PYTHON), "mpiexec")
    if os.access(candidate, os.X_OK):
        return candidate
    found = shutil.which("mpiexec")
    if not found:
        raise RuntimeError("mpiexec not found next to %s nor on PATH" % PYTHON)
    return found


def base_env(extra=None, scrub=_SCRUB_PREFIXES):
    """The environment of a job's ranks: no launcher/MPI variables inherited from
    an enclosing job, this tree importable, small TensorFlow thread pools."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(scrub)}
    env["PYTHONPATH"] = os.pathsep.join(
        [REPO] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["PYTHONUNBUFFERED"] = "1"
    # Two cores are shared by all ranks: keep TensorFlow's own thread pools small.
    env.setdefault("TF_NUM_INTRAOP_THREADS", "1")
    env.setdefault("OMP_NUM_THREADS", "1")
    if extra:
        env.update(extra)
    return env


def job_env(extra=None):
    env = base_env()
    # A collective some rank never submits fails after this long, naming the tensor
    # and the missing ranks, well before the job's hard time limit.
    env.setdefault("HOROVOD_STALL_CHECK_TIME_SECONDS", "20")
    env.setdefault("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "90")
    if extra:
        env.update(extra)
    return env


def command(np_, transport, script, args=()):
    if transport == "gloo":
        launcher = [PYTHON, "-m", "tf_hvd.runner", "-np", str(np_)]
    elif transport == "mpi":
        launcher = [mpiexec_path(), "-n", str(np_)]
    else:
        raise ValueError("unknown transport %r" % transport)
    return launcher + [PYTHON, script] + list(args)


def _children_map():
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid ...; comm may contain spaces and parentheses.
        fields = stat[stat.rfind(")") + 2:].split()
        children.setdefault(int(fields[1]), []).append(int(entry))
    return children


def _descendants(pid):
    children = _children_map()
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in children.get(p, ()):
            found.append(c)
            todo.append(c)
    return found


def kill_tree(proc):
    """Kills the job's process group and every descendant (some may have left the group)."""
    pids = _descendants(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def run_job(np_, transport, script, result_dir, args=(), env=None, timeout=240):
    """Runs the job; returns (returncode or None on timeout, combined output, seconds)."""
    os.makedirs(result_dir, exist_ok=True)
    script = script if os.path.isabs(script) else os.path.join(WORKERS, script)
    worker_args = ["--np", str(np_), "--transport", transport, "--result-dir", result_dir]
    cmd = command(np_, transport, script, worker_args + list(args))
    log_path = os.path.join(result_dir, "output.log")
    t0 = time.time()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, env=job_env(env), stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(proc)
            proc.wait()
            code = None
        # Stray ranks (a launcher that exited before its children) are not left behind.
        leftovers = _descendants(proc.pid)
        if leftovers:
            kill_tree(proc)
    with open(log_path, "rb") as f:
        output = f.read().decode("utf-8", "replace")
    return code, output, time.time() - t0, cmd


_NOISE = re.compile(r"cuda|cpu_feature_guard|oneDNN|absl::InitializeLog|rebuild TensorFlow|"
                    r"AVX|Could not find|computation_placer|TF-TRT|dso_loader|port\.cc")


def readable_tail(output, lines=120):
    kept = [l for l in output.splitlines() if not _NOISE.search(l)]
    return "\n".join(kept[-lines:])


def assert_job_ok(np_, result_dir, code, output, seconds, cmd, timeout=240):
    failures = [l for l in output.splitlines() if " FAIL " in l or "EXCEPTION" in l][:40]
    where = "command: %s\n%s--- output (last lines, TF noise removed) ---\n%s" % (
        " ".join(cmd),
        ("--- failed checks ---\n%s\n" % "\n".join(failures)) if failures else "",
        readable_tail(output))
    if code is None:
        raise AssertionError("job did not finish within %ds (hang?) and was killed\n%s" % (
            timeout, where))
    failed = sorted(f for f in os.listdir(result_dir) if f.endswith(".fail"))
    if failed:
        details = []
        for f in failed:
            with open(os.path.join(result_dir, f)) as fh:
                details.append("%s:\n%s" % (f, fh.read()[:4000]))
        raise AssertionError("checks failed on %s\n%s\n%s" % (
            ", ".join(failed), "\n".join(details), where))
    if code != 0:
        raise AssertionError("job exited with code %d\n%s" % (code, where))
    missing = [r for r in range(np_)
               if not os.path.exists(os.path.join(result_dir, "rank%d.ok" % r))]
    if missing:
        raise AssertionError("ranks %s wrote no result\n%s" % (missing, where))
    ok_lines = re.findall(r"OK (\d+) checks", output)
    if len(ok_lines) != np_:
        raise AssertionError("expected %d 'OK <n> checks' lines, found %d\n%s" % (
            np_, len(ok_lines), where))
    return sum(int(c) for c in ok_lines)

"""Starting a multi-process worker job from a test, with a hard time limit.

``run_job(np, transport, script, ...)`` starts ``script`` on ``np`` ranks:
* transport "gloo": ``python -m tf_hvd.runner -np N python script ...``
* transport "mpi":  ``<venv>/bin/mpiexec -n N python script ...`` (the core picks
  MPI from the PMI_* variables mpiexec sets)
and returns (returncode, output). A job that exceeds ``timeout`` is killed
(every process it started) and reported as a failure, so a hang fails the test
instead of blocking the suite (tests/jobrunner.py runs it).

Workers get ``--np N --transport T --result-dir DIR`` and leave ``rank<r>.ok``
(or ``rank<r>.fail``) in DIR; ``assert_job_ok`` checks the exit code, that every
rank wrote ``.ok``, and that the output has an ``OK <n> checks`` line per rank.
"""

import os
import re

from jobrunner import (PYTHON, REPO, base_env, job_env, kill_tree, mpiexec_cmd,  # noqa: F401
                       mpiexec_path, run, tfhvdrun_cmd)

WORKERS = os.path.join(REPO, "tests", "parallel", "workers")


def command(np_, transport, script, args=()):
    if transport == "gloo":
        launcher = tfhvdrun_cmd(np_)
    elif transport == "mpi":
        launcher = mpiexec_cmd(np_)
    else:
        raise ValueError("unknown transport %r" % transport)
    return launcher + [PYTHON, script] + list(args)


def run_job(np_, transport, script, result_dir, args=(), env=None, timeout=240):
    """Runs the job; returns (returncode or None on timeout, combined output, seconds, cmd).
    The output is also in ``result_dir``/output.log."""
    os.makedirs(result_dir, exist_ok=True)
    script = script if os.path.isabs(script) else os.path.join(WORKERS, script)
    worker_args = ["--np", str(np_), "--transport", transport, "--result-dir", result_dir]
    cmd = command(np_, transport, script, worker_args + list(args))
    res = run(cmd, timeout, env=job_env(env), log_path=os.path.join(result_dir, "output.log"))
    return res.returncode, res.output, res.seconds, cmd


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

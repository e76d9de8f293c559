"""Load: 5,000 distinct tensors negotiated in one step, and 50 TF threads submitting
collectives at once, with exact results (np=3 on Gloo, np=2 on MPI: both transports
and both job sizes; np=2 on Gloo adds no path the two do not run).

One bounded job per configuration runs both sections (tests/parallel/load_workers/
load_worker.py); the two tests read its per-rank reports. The long soak run (20,000
steps, memory and file descriptors) is python/benchmarks/soak.py; a short run of it
is checked here too, so that the script itself keeps working.
"""

import glob
import json
import os
import re
import sys

import pytest

from collective_launch import job_env, readable_tail
from jobrunner import run, tfhvdrun_cmd

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKER = os.path.join(REPO, "tests", "parallel", "load_workers", "load_worker.py")
SOAK = os.path.join(REPO, "python", "benchmarks", "soak.py")
PY = sys.executable
TIMEOUT = 420

CONFIGS = [(3, "gloo"), (2, "mpi")]
_jobs = {}


def _launch(cmd, log_path, timeout, env=None):
    """(returncode or None when killed at the time limit, output, seconds)."""
    res = run(cmd, timeout, env=job_env(env), log_path=log_path)
    return res.returncode, res.output, res.seconds


def _cmd(np_, transport, tail):
    return tfhvdrun_cmd(np_, mpi=transport == "mpi") + [PY] + tail


def load_job(tmp_path_factory, np_, transport):
    key = (np_, transport)
    if key not in _jobs:
        if transport == "mpi":
            from tf_hvd.runner.modes import mpiexec as mpi
            if mpi.find_mpiexec() is None:
                pytest.skip("no mpiexec")
        result_dir = str(tmp_path_factory.mktemp("load-%s-np%d" % (transport, np_)))
        cmd = _cmd(np_, transport, [WORKER, "--result-dir", result_dir])
        code, output, seconds = _launch(cmd, os.path.join(result_dir, "output.log"), TIMEOUT)
        events = {}
        for path in glob.glob(os.path.join(result_dir, "rank*.events")):
            with open(path) as f:
                for line in f:
                    e = json.loads(line)
                    events.setdefault(e["rank"], []).append(e)
        where = "command: %s\nexit %s after %.0f s\n%s" % (
            " ".join(cmd), code, seconds, readable_tail(output, 60))
        _jobs[key] = (code, events, where)
    code, events, where = _jobs[key]
    assert code is not None, "load job did not finish within %d s\n%s" % (TIMEOUT, where)
    assert code == 0, where
    assert sorted(events) == list(range(np_)), where
    return events, where


def _find(events, rank, name):
    return [e for e in events[rank] if e["event"] == name]


@pytest.mark.parametrize("np_,transport", CONFIGS)
def test_5000_distinct_tensors_in_one_step(tmp_path_factory, np_, transport):
    events, where = load_job(tmp_path_factory, np_, transport)
    for r in range(np_):
        runs = _find(events, r, "many_tensors")
        assert len(runs) == 2, where
        for run in runs:
            assert run["count"] == 5000, run
            assert run["wrong_count"] == 0, (run, where)


@pytest.mark.parametrize("np_,transport", CONFIGS)
def test_50_threads_submitting_concurrently(tmp_path_factory, np_, transport):
    events, where = load_job(tmp_path_factory, np_, transport)
    for r in range(np_):
        run, = _find(events, r, "many_threads")
        assert run["threads"] == 50
        assert run["error_count"] == 0 and run["stuck"] == 0, (run, where)
        assert run["completed"] == run["expected"] == 500, run


def test_soak_script_short_run(tmp_path):
    """python/benchmarks/soak.py end to end with few steps (the real run is 20,000)."""
    out_json = str(tmp_path / "soak.json")
    cmd = _cmd(2, "gloo", [SOAK, "--steps", "300", "--warmup", "100", "--tensors", "50",
                           "--sample-every", "50", "--report-every", "100",
                           # few steps: allocator noise is not amortised, so the memory
                           # limit is relaxed here; the fd check is exact
                           "--max-growth", "50", "--json", out_json])
    code, output, _ = _launch(cmd, str(tmp_path / "soak.log"), 300)
    assert code == 0, readable_tail(output)
    for r in range(2):
        assert re.search(r"^\[%d\]<stdout>:soak rank %d: 300 steps x 50 tensors, .* \| PASS$"
                         % (r, r), output, re.M), readable_tail(output)
    assert "weights identical on every rank -> PASS" in output
    with open(out_json) as f:
        result = json.load(f)
    assert result["passed"] and len(result["ranks"]) == 2
    assert all(r["fds_end"] <= r["fds_after_warmup"] for r in result["ranks"])

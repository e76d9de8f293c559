"""HOROVOD_CPU_BIND under contention (cc/common/host/cpu_binding.h), in a real np=2 job.

Each local rank starts bound to its own slice of the CPUs. Busy processes pinned to
local rank 1's slice make that rank give its binding up (it may then run on every CPU);
once they are gone it binds again after HOROVOD_CPU_BIND_RETRY_SECONDS, while local rank
0, whose CPUs stay free, keeps its binding throughout. With the retry at 0 the binding is
kept whatever runs.
"""

import json
import os
import sys

import pytest

from collective_launch import job_env, readable_tail
from jobrunner import run, tfhvdrun_cmd

PY = sys.executable
TIMEOUT = 180

WORKER = r'''
import json, os, subprocess, sys, time
import tf_hvd as hvd
from tf_hvd import tf_threads

hvd.init()
out, expect_release = sys.argv[1], sys.argv[2] == "1"
events = []
def note(what):
    b = tf_threads.tf_thread_settings()["binding"]
    events.append({"what": what, "t": time.monotonic(), "bound": b["bound"],
                   "releases": b["releases"], "cpus": b["cpus"],
                   "affinity": sorted(os.sched_getaffinity(0))})
def wait_for(pred, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if pred(tf_threads.tf_thread_settings()["binding"]):
            return True
        time.sleep(0.1)
    return False

note("start")
hvd.allreduce([1.0], name="ready")
busy = []
if hvd.local_rank() == 1:
    mine = tf_threads.tf_thread_settings()["cpus"]
    for cpu in mine:  # one busy loop on each CPU of this rank's slice
        p = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        os.sched_setaffinity(p.pid, [cpu])
        busy.append(p)
    released = wait_for(lambda b: not b["bound"], 12)
    note("released" if released else "not released")
    time.sleep(1)
    note("while busy")
    for p in busy:
        p.kill()
        p.wait()
    if released:
        note("rebound" if wait_for(lambda b: b["bound"], 12) else "not rebound")
        time.sleep(3)  # quiet again: stays bound
        note("after")
hvd.allreduce([1.0], name="done")
note("end")
with open(os.path.join(out, "rank%d.json" % hvd.rank()), "w") as f:
    json.dump(events, f)
'''


def _job(tmp_path, retry_s):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: nothing to bind")
    script = tmp_path / "binding_worker.py"
    script.write_text(WORKER)
    cmd = tfhvdrun_cmd(2) + [PY, str(script), str(tmp_path), "1" if retry_s else "0"]
    res = run(cmd, TIMEOUT, env=job_env({"HOROVOD_CPU_BIND_RETRY_SECONDS": str(retry_s)}),
              log_path=str(tmp_path / "output.log"))
    where = "exit %s after %.0f s\n%s" % (res.returncode, res.seconds,
                                          readable_tail(res.output, 60))
    assert res.ok, where
    events = {}
    for rank in (0, 1):
        with open(tmp_path / ("rank%d.json" % rank)) as f:
            events[rank] = {e["what"]: e for e in json.load(f)}
    return events, where


def test_a_rank_whose_cpus_are_busy_runs_unbound_and_binds_again_once_they_are_free(tmp_path):
    events, where = _job(tmp_path, retry_s=3)
    cpus = sorted(os.sched_getaffinity(0))
    half = len(cpus) // 2
    own = {0: cpus[:half], 1: cpus[half:2 * half]}
    for rank in (0, 1):
        start = events[rank]["start"]
        assert start["bound"] and start["cpus"] == own[rank], (rank, start, where)
        assert start["affinity"] == own[rank], (rank, start, where)
    r1 = events[1]
    assert "released" in r1, (r1, where)
    # Released: the process may use every CPU it had before binding.
    assert r1["released"]["affinity"] == cpus and r1["released"]["cpus"] == cpus, (r1, where)
    assert not r1["while busy"]["bound"], (r1, where)
    # The retry came after the busy processes ended, and found the CPUs free.
    assert "rebound" in r1, (r1, where)
    assert r1["rebound"]["t"] - r1["released"]["t"] >= 2.5, (r1, where)
    for what in ("rebound", "after", "end"):
        e = r1[what]
        assert e["bound"] and e["affinity"] == own[1] and e["releases"] == 1, (what, r1, where)
    # Rank 0's CPUs stayed free: it never gave its binding up.
    for e in events[0].values():
        assert e["bound"] and e["releases"] == 0 and e["affinity"] == own[0], (events[0], where)


def test_retry_zero_keeps_the_binding_whatever_runs(tmp_path):
    events, where = _job(tmp_path, retry_s=0)
    r1 = events[1]
    assert "not released" in r1, (r1, where)
    cpus = sorted(os.sched_getaffinity(0))
    own = cpus[len(cpus) // 2:2 * (len(cpus) // 2)]
    for e in r1.values():
        assert e["bound"] and e["releases"] == 0 and e["affinity"] == own, (r1, where)

"""Never hang: a rank that stops answering ends the job (or leaves an elastic job), named;
a rank that is only slow is never killed.

Each rank's core proves it is alive to its peers once a second, apart from the
collectives (cc/common/core/liveness_monitor.h); HOROVOD_PEER_TIMEOUT_SECONDS (default
20) after its last proof a silent rank is declared lost. Jobs run
fault_workers/liveness_worker.py (exact allreduces every step) or, elastic,
fault_workers/elastic_tf2_epochs.py. Cases:

* a rank SIGSTOPped at step 20 of a 3-rank job (default bound): the others' collectives
  fail naming it, the launcher SIGKILLs it and ends the job within 45 s of the stop,
  naming it, and no process is left;
* one host of two cut off by the network mid-allreduce (iptables DROP of everything
  through its interface, inside its namespace): on Gloo and on MPI (``--mpi``) the job
  ends within 45 s of the cut, naming the rank there; the launcher never waits for
  the unreachable host's ssh;
* an elastic job on three hosts whose third host cuts itself off at epoch 1: the launcher
  blacklists it and the other two finish from the last commit with the exact weights;
* a rank sleeping 180 s between two steps while the others wait in the next allreduce
  (default bound): the stall inspector warns, naming it, and the job ends normally.
  It runs in the background from the module's start, beside the other cases.
"""

import json
import os
import re
import subprocess
import time

import numpy as np
import pytest

from elastic_tf2_weights import expected_weights
from jobrunner import PYTHON, REPO, Job, job_env, run, tfhvdrun_cmd, wait_gone
from namespace_hosts import leftovers

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "fault_workers", "liveness_worker.py")
ELASTIC = os.path.join(HERE, "fault_workers", "elastic_tf2_epochs.py")
CLUSTER_HOSTS = 3  # h1, h2 (the 2-host jobs) and h3 (the elastic job's third host)
BOUND = 45          # seconds from the fault to the end of the job (the bound)
SHORT = "6"         # HOROVOD_PEER_TIMEOUT_SECONDS where the bound is not the point
SLOW_SLEEP = 180


def _events(result_dir):
    out = {}
    for name in os.listdir(result_dir):
        if name.startswith("rank") and name.endswith(".events"):
            with open(os.path.join(result_dir, name)) as f:
                out[int(name[4:-7])] = [json.loads(l) for l in f if l.strip()]
    return out


def _first(events, name):
    return next((e for e in events if e["event"] == name), None)


def _pids(result_dir):
    pids = []
    for name in os.listdir(result_dir):
        if name.startswith("pid."):
            with open(os.path.join(result_dir, name)) as f:
                pids.append(int(f.read()))
    return pids


def _launcher_lines(output):
    lines = [l for l in output.splitlines() if l.startswith("tfhvdrun:")]
    print("\n".join(lines))  # the closing note quotes them (pytest -s)
    return lines


# -- a rank that is only slow (runs beside the other cases) --------------------------------

@pytest.fixture(scope="module")
def slow_job(tmp_path_factory):
    """The 180 s sleeper, started when the module starts; yields (Job, result dir)."""
    result_dir = str(tmp_path_factory.mktemp("slow"))
    env = job_env({"HOROVOD_STALL_CHECK_TIME_SECONDS": "60",
                   "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "600"})
    env.pop("HOROVOD_PEER_TIMEOUT_SECONDS", None)  # the default bound
    cmd = tfhvdrun_cmd(3) + [PYTHON, WORKER, "--scenario", "slow", "--result-dir", result_dir,
                             "--victim", "1", "--at", "5", "--steps", "10",
                             "--sleep", str(SLOW_SLEEP), "--max-seconds", str(SLOW_SLEEP + 120)]
    with Job(cmd, env=env, log_path=os.path.join(result_dir, "output.log")) as job:
        yield job, result_dir


@pytest.fixture(scope="module", autouse=True)
def _start_slow_job_first(slow_job):
    """Starts the sleeper before the first case, so that its 3 minutes overlap theirs."""


# -- a frozen rank ------------------------------------------------------------------------------

def test_a_sigstopped_rank_ends_the_job_named(tmp_path):
    result_dir = str(tmp_path)
    cmd = tfhvdrun_cmd(3) + [PYTHON, WORKER, "--scenario", "freeze", "--result-dir",
                             result_dir, "--victim", "1", "--at", "20"]
    env = job_env()
    env.pop("HOROVOD_PEER_TIMEOUT_SECONDS", None)  # the default bound
    res = run(cmd, 150, env=env, log_path=os.path.join(result_dir, "output.log"))
    ended = time.time()
    assert not res.timed_out, res.describe()
    events = _events(result_dir)
    stopped = _first(events[1], "victim_acts")["wall"]
    assert ended - stopped < BOUND, (ended - stopped, res.describe())
    lines = _launcher_lines(res.output)
    with open(os.path.join(result_dir, "pid.1")) as f:
        frozen_pid = int(f.read())
    assert lines == ["tfhvdrun: rank 1 (on localhost, pid %d) stopped answering (its core sent "
                     "no liveness proof for 20 s) and was killed (SIGKILL); ranks 0, 2 stopped "
                     "in consequence" % frozen_pid], res.describe()
    assert res.returncode == 128 + 9, res.describe()
    for r in (0, 2):
        failed = _first(events[r], "collective_failed")
        assert failed is not None, events[r]
        assert failed["type"] == "UnavailableError", failed
        assert failed["message"].startswith(
            "rank 1 (on localhost) stopped answering: its core sent no liveness proof for ") \
            or "rank 1 (on localhost) stopped answering: its core sent no liveness proof" in \
            failed["message"], failed
        assert "HOROVOD_PEER_TIMEOUT_SECONDS=20" in failed["message"], failed
        assert 19 <= failed["wall"] - stopped < 24, failed["wall"] - stopped
    assert not wait_gone(_pids(result_dir), within=5), res.describe()
    assert not res.survivors, res.describe()
    print("SIGSTOP: job ended %.1f s after the stop (ops failed %.1f s after)"
          % (ended - stopped, _first(events[0], "collective_failed")["wall"] - stopped))


# -- a host cut off by the network ----------------------------------------------------------

def _iptables(cluster, host, verb, directions=("in", "out")):
    """DROP (verb -A) or stop dropping (-D) what goes through ``host``'s eth0."""
    for way in directions:
        chain, flag = ("INPUT", "-i") if way == "in" else ("OUTPUT", "-o")
        subprocess.run(["ip", "netns", "exec", cluster.netns(host), "iptables", verb, chain,
                        flag, "eth0", "-j", "DROP"], check=verb == "-A", timeout=30)


def _cut_when_steady(cluster, job, result_dir, host, np_, directions=("in", "out")):
    """Waits until every rank reached the worker's --at step, then cuts ``host`` off;
    returns the wall time of the cut."""
    deadline = time.monotonic() + 120
    while len([n for n in os.listdir(result_dir) if n.startswith("steady.")]) < np_:
        assert time.monotonic() < deadline and job.proc.poll() is None, \
            job.wait(timeout=10).describe()
        time.sleep(0.2)
    time.sleep(0.5)  # mid-allreduce: the ranks reduce every ~20 ms
    _iptables(cluster, host, "-A", directions)
    return time.time()


@pytest.mark.parametrize("transport", ["gloo", "mpi"])
def test_a_partitioned_host_ends_the_job_named(cluster, tmp_path, transport):
    result_dir = str(tmp_path)
    cmd = [PYTHON, "-m", "tf_hvd.runner", "-np", "2", "-H", "h1:1,h2:1"]
    if transport == "mpi":
        cmd += ["--mpi", "--network-interfaces", "eth0"]
    cmd += ["-p", "2222", "-i", cluster.client_key]
    cmd += [PYTHON, WORKER, "--scenario", "run", "--result-dir", result_dir, "--at", "20",
            "--max-seconds", "150"]
    env = job_env({"HOROVOD_PEER_TIMEOUT_SECONDS": "10"})
    try:
        with Job(cluster.exec_argv("h1", cmd), env=env, cwd=REPO,
                 log_path=os.path.join(result_dir, "output.log")) as job:
            cut = _cut_when_steady(cluster, job, result_dir, "h2", 2)
            res = job.wait(timeout=150)
        ended = time.time()
    finally:
        _iptables(cluster, "h2", "-D")
    assert not res.timed_out, res.describe()
    assert ended - cut < BOUND, (ended - cut, res.describe())
    lines = _launcher_lines(res.output)
    named = [l for l in lines if "stopped answering" in l]
    # (under mpiexec a last line may say it ended mpiexec's ssh to the unreachable host)
    assert len(named) == 1 and named[0].startswith(
        "tfhvdrun: rank 1 (on h2) stopped answering (its core sent no liveness proof for "
        "10 s)"), res.describe()
    assert res.returncode != 0, res.describe()
    failed = _first(_events(result_dir)[0], "collective_failed")
    assert failed is not None and failed["type"] == "UnavailableError", failed
    assert "rank 1 (on h2) stopped answering" in failed["message"], failed
    print("partition (%s): job ended %.1f s after the cut (rank 0's op failed %.1f s "
          "after)" % (transport, ended - cut, failed["wall"] - cut))
    _left_behind_end(cluster)


def _left_behind_end(cluster, within=60):
    """The cut-off host's ranks end by their own bound once their links time out; kill
    what is left after ``within`` s so the next case starts clean, and say so."""
    deadline = time.monotonic() + within
    while leftovers(cluster) and time.monotonic() < deadline:
        time.sleep(1)
    left = leftovers(cluster)
    for line in left:
        pid = int(line.split()[1])
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    assert not left, "processes left on the hosts after %d s: %s" % (within, left)


# -- an elastic job loses a host to a partition -------------------------------------------------

def test_an_elastic_job_loses_a_partitioned_host_and_finishes(cluster, tmp_path):
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    discover = tmp_path / "discover.sh"
    discover.write_text("#!/bin/sh\necho h1:1\necho h2:1\necho h3:1\n")
    discover.chmod(0o755)
    cmd = cluster.exec_argv("h1", [
        PYTHON, "-m", "tf_hvd.runner", "-np", "3", "--min-np", "2", "--max-np", "3",
        "--host-discovery-script", str(discover), PYTHON, ELASTIC, "--dir", str(job_dir),
        "--fail-host", "h3", "--fail-how", "cut"])
    env = job_env({"HOROVOD_PEER_TIMEOUT_SECONDS": SHORT})
    try:
        res = run(cmd, 200, env=env, cwd=REPO, log_path=str(tmp_path / "output.log"))
    finally:
        _iptables(cluster, "h3", "-D")
    assert not res.timed_out, res.describe(text=res.output[-6000:])
    assert res.returncode == 0, res.describe(text=res.output[-6000:])
    lines = _launcher_lines(res.output)
    assert lines[0].startswith("tfhvdrun: rank 2 (on h3) stopped answering (its core sent "
                               "no liveness proof for %s s) and was killed (SIGKILL); the job "
                               "goes on with the 2 rank(s) left (elastic reset 1)" % SHORT), lines
    assert any(l.startswith("tfhvdrun: blacklisting h3") for l in lines), lines
    events = {}
    for path in job_dir.glob("rank*.events"):
        events[int(path.name[4:-7])] = [json.loads(l) for l in path.read_text().splitlines()]
    cut = _first(events[2], "failing")
    assert cut is not None and cut["how"] == "cut", events[2]
    want = expected_weights([3, 2, 2])  # epoch 0 on three hosts, then on h1 and h2
    for i in (0, 1):
        done = _first(events[i], "done")
        assert done is not None, events[i]
        assert (done["epoch"], done["size"]) == (3, 2), done
        assert np.allclose(done["weights"], want, rtol=1e-5, atol=1e-6), (done, want)
        resets = [e for e in events[i] if e["event"] == "reset"]
        # from the commit after epoch 0's last batch
        assert [(r["epoch"], r["batch"]) for r in resets][-1:] == [(1, 0)] or \
            [(r["epoch"], r["batch"]) for r in resets][-1:] == [(0, 3)], resets
    _left_behind_end(cluster)


# -- last: the slow rank's job, started with the module, has had its 3 minutes ------------

def test_a_slow_rank_is_never_declared_lost(slow_job):
    job, result_dir = slow_job
    res = job.wait(timeout=SLOW_SLEEP + 150)
    assert res.returncode == 0, res.describe()
    events = _events(result_dir)
    assert sorted(events) == [0, 1, 2], events.keys()
    for r in range(3):
        assert _first(events[r], "done")["steps"] == 10, events[r]
        assert _first(events[r], "collective_failed") is None, events[r]
    slept = _first(events[1], "woke")["wall"] - _first(events[1], "sleeping")["wall"]
    assert slept >= SLOW_SLEEP - 1, slept
    # The stall inspector still warns at its time, naming the sleeper.
    assert re.search(r"Stall detected: .*not yet by ranks \[1\]", res.output), res.describe()
    assert "stopped answering" not in res.output, res.describe()
    assert not res.survivors, res.describe()

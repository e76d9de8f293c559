"""Elastic jobs placed by their host-discovery script alone, across two hosts: network
namespaces with their own sshd (tools/clusters/netns_cluster.py; skipped, with the reason, unless
this runs as root with ip and sshd). One cluster (h1, h2) serves the module and is always
torn down; the launcher runs on h1 as horovodrun would, with no -H:

    tfhvdrun -np 2 --min-np 2 --max-np 4 --host-discovery-script ./discover.sh python ...

The script is a Horovod elastic TF2 program (fault_workers/elastic_tf2_epochs.py: 3
epochs of 3 batches, a commit after each batch); its weights do not depend on the number
of ranks, so a job that applied every (epoch, batch) step exactly once ends with the
weights computed here with numpy.

(a)/(b) discovery lists h1:2,h2:2: four ranks start; at epoch 1 the first rank on h1
  raises (or is SIGKILLed): h1 is blacklisted, its other rank stopped, and the two ranks
  on h2 finish epochs 1 and 2 at size 2 from the last commit;
(c) the script lists h1:2, adds h2:2 after epoch 0 and drops h1 after epoch 1: sizes 2, 4,
  2, the last epoch on h2 only;
(d) every rank raises: the job ends at once (no --elastic-timeout wait) naming the
  failures; (e) --reset-limit 0: the first failure ends the job, saying why.
"""

import json
import os
import re
import time

import numpy as np
import pytest

from elastic_tf2_weights import BATCHES, EPOCHS, expected_weights
from jobrunner import PYTHON, REPO, job_env, run

HERE = os.path.dirname(os.path.abspath(__file__))

WORKER = os.path.join(HERE, "fault_workers", "elastic_tf2_epochs.py")


def _job(cluster, tmp_path, script, flags, worker_args=(), timeout=150):
    """Run the worker from h1 under the discovery ``script`` (shell lines; $D is the
    job's directory); (result, {id: events}, launcher lines, seconds)."""
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    discover = tmp_path / "discover.sh"
    discover.write_text("#!/bin/sh\nD=%s\n%s\nexit 0\n" % (job_dir, script))
    discover.chmod(0o755)
    cmd = cluster.exec_argv("h1", [PYTHON, "-m", "tf_hvd.runner"] + flags + [
        "--host-discovery-script", str(discover), PYTHON, WORKER, "--dir", str(job_dir)] +
        list(worker_args))
    started = time.monotonic()
    res = run(cmd, timeout, env=job_env({"HOROVOD_GLOO_TIMEOUT_SECONDS": "20"}), cwd=REPO,
              log_path=str(tmp_path / "output.log"))
    seconds = time.monotonic() - started
    assert not res.timed_out and not res.survivors, res.describe(text=res.output[-6000:])
    events = {}
    for path in job_dir.glob("rank*.events"):
        events[int(path.name[4:-7])] = [json.loads(l) for l in path.read_text().splitlines()]
    launcher = [l for l in res.output.splitlines() if l.startswith("tfhvdrun:")]
    print("\n".join(launcher))  # the report quotes them (pytest -s)
    return res, events, launcher, seconds


def _of(events, name):
    return [e for e in events if e["event"] == name]


def _batches(events):
    return [(e["epoch"], e["batch"], e["size"], e["host"]) for e in _of(events, "batch")]


def _check_done(events, ids, size, host):
    want = expected_weights()
    for i in ids:
        [done] = _of(events[i], "done")
        assert (done["epoch"], done["batch"], done["size"], done["host"]) == \
            (EPOCHS, 0, size, host), done
        assert np.allclose(done["weights"], want, rtol=1e-5, atol=1e-6), (done, want)


@pytest.mark.parametrize("how", ["raise", "kill"])
def test_a_failed_host_is_blacklisted_and_the_other_host_finishes(cluster, tmp_path, how):
    res, events, launcher, _ = _job(
        cluster, tmp_path, "echo h1:2\necho h2:2", ["-np", "2", "--min-np", "2",
                                                    "--max-np", "4"],
        ["--fail-host", "h1", "--fail-how", how])
    assert res.returncode == 0, res.describe(text=res.output[-6000:])
    status = ("exited with code 1 after raising an exception (its traceback is above)"
              if how == "raise" else "was killed by signal 9 (SIGKILL)")
    assert launcher == [
        "tfhvdrun: rank 0 (on h1) %s; the job goes on with the 2 rank(s) left (elastic "
        "reset 1)" % status,
        "tfhvdrun: blacklisting h1 after rank 0's failure: no rank starts on it for the rest "
        "of the job (--blacklist-cooldown-range MIN MAX lets it come back); stopping its "
        "other rank(s) 1"], launcher
    assert sorted(events) == [0, 1, 2, 3]  # four ranks started: h1:2 and h2:2 discovered
    assert [e["epoch"] for e in _of(events[0], "failing")] == [1]
    first = [(e, b, 4) for e in range(1) for b in range(BATCHES)]
    for i in (2, 3):  # h2's ranks: epoch 0 at size 4, then the rest at size 2 on h2
        assert [b[:3] for b in _batches(events[i])] == first + [
            (e, b, 2) for e in (1, 2) for b in range(BATCHES)], _batches(events[i])
        # the last reset forms the job on h2 (rank 1 may still be in an earlier one),
        # from the commit after epoch 0's last batch
        resets = _of(events[i], "reset")
        assert [(r["epoch"], r["batch"]) for r in resets] == [(0, BATCHES)] * len(resets)
        assert (resets[-1]["size"], resets[-1]["rank"]) == (2, i - 2), resets
    _check_done(events, (2, 3), 2, "h2")
    assert not _of(events[0], "done") and not _of(events[1], "done")


def test_hosts_added_and_removed_by_the_script_resize_the_job(cluster, tmp_path):
    script = ("[ -e $D/epoch1.done ] || echo h1:2\n"
              "[ -e $D/epoch0.done ] && echo h2:2")
    res, events, launcher, _ = _job(
        cluster, tmp_path, script, ["-np", "2", "--min-np", "2", "--max-np", "4"],
        ["--mark-epochs", "--want-size", "1:4", "--want-size", "2:2"])
    assert res.returncode == 0, res.describe(text=res.output[-6000:])
    assert launcher == [
        "tfhvdrun: host discovery: 2 slot(s) on h2; started rank(s) 2, 3, which the running ranks wait for at their next commit (at most 600 s, --elastic-timeout) to hand them the committed state",
        "tfhvdrun: host discovery: h1 is no longer listed; rank(s) 0, 1 on it leave at the "
        "next commit (the others re-form without them)"], launcher
    sizes = {}
    for i in events:
        for epoch, _, size, host in _batches(events[i]):
            sizes.setdefault(epoch, set()).add((size, host))
    assert sizes == {0: {(2, "h1")}, 1: {(4, "h1"), (4, "h2")}, 2: {(2, "h2")}}, sizes
    # the re-formed jobs' topology groups ranks by host: at size 4, two per host
    topology = {}
    for i in events:
        for e in _of(events[i], "batch"):
            topology.setdefault(e["epoch"], set()).add(
                (e["rank"], e["host"], tuple(e["local"]), tuple(e["cross"])))
    assert topology == {
        0: {(0, "h1", (0, 2), (0, 1)), (1, "h1", (1, 2), (0, 1))},
        1: {(0, "h1", (0, 2), (0, 2)), (1, "h1", (1, 2), (0, 2)),
            (2, "h2", (0, 2), (1, 2)), (3, "h2", (1, 2), (1, 2))},
        2: {(0, "h2", (0, 2), (0, 1)), (1, "h2", (1, 2), (0, 1))}}, topology
    _check_done(events, (2, 3), 2, "h2")


RAISED = "exited with code 1 after raising an exception (its traceback is above)"
BLACKLISTED = ("no rank starts on it for the rest of the job (--blacklist-cooldown-range MIN "
               "MAX lets it come back)")


def test_every_rank_failing_ends_the_job_at_once(cluster, tmp_path):
    res, events, launcher, seconds = _job(
        cluster, tmp_path, "echo h1:1\necho h2:1", ["-np", "2"], ["--fail-all"])
    assert res.returncode == 1, res.describe(text=res.output[-6000:])
    assert seconds < 120, seconds  # --elastic-timeout is 600 s: it was not waited out
    # Both fail at once: the launcher sees the two exits in one poll or in two.
    ended = "no rank is left: stopping the job (every rank failed or was stopped)"
    assert len([l for l in launcher if l.endswith(ended)]) == 1, launcher
    assert launcher[-1] == "tfhvdrun: the job failed: every rank failed or was stopped: " \
        "rank 0 (on h1) %s; rank 1 (on h2) %s" % (RAISED, RAISED), launcher
    if not launcher[0].endswith(ended):
        first = re.match(r"tfhvdrun: rank (\d) \(on (h\d)\)", launcher[0]).groups()
        second = ("0", "h1") if first == ("1", "h2") else ("1", "h2")
        assert launcher == [
            "tfhvdrun: rank %s (on %s) %s; 1 rank(s) left, fewer than --min-np 2: waiting "
            "up to 600 s (--elastic-timeout)" % (first + (RAISED,)),
            "tfhvdrun: blacklisting %s after rank %s's failure: %s" % (first[1], first[0],
                                                                      BLACKLISTED),
            "tfhvdrun: rank %s (on %s) %s; %s" % (second + (RAISED, ended)),
            "tfhvdrun: blacklisting %s after rank %s's failure: %s" % (second[1], second[0],
                                                                      BLACKLISTED),
            launcher[-1]], launcher
    else:
        assert launcher == [
            "tfhvdrun: rank 0 (on h1) %s; %s" % (RAISED, ended),
            "tfhvdrun: blacklisting h1 after rank 0's failure: %s" % BLACKLISTED,
            launcher[-1]], launcher
    assert all(len(_of(events[i], "failing")) == 1 for i in (0, 1)), events


def test_the_reset_limit_ends_the_job_saying_so(cluster, tmp_path):
    res, events, launcher, _ = _job(
        cluster, tmp_path, "echo h1:1\necho h2:1",
        ["-np", "2", "--min-np", "1", "--reset-limit", "0"], ["--fail-host", "h1"])
    assert res.returncode == 1, res.describe(text=res.output[-6000:])
    assert launcher == [
        "tfhvdrun: rank 0 (on h1) %s; stopping the job: it has been reset 1 time(s), more "
        "than --reset-limit 0 allows" % RAISED,
        "tfhvdrun: blacklisting h1 after rank 0's failure: %s" % BLACKLISTED,
        launcher[2]], launcher
    # the final report names rank 0 (rank 1, alone at np=1 meanwhile, may have finished
    # before the launcher saw rank 0's exit: it is not named as a failure then)
    # (with its pid: the namespace hosts' ranks run on the launcher's machine)
    assert re.match(r"tfhvdrun: rank 0 \(on h1, pid \d+\) %s" % re.escape(RAISED),
                    launcher[2]), launcher

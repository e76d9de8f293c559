"""Elastic runs (tfhvdrun --min-np, tf_hvd.elastic): a lost rank does not end the job; the
survivors roll back to their last commit, re-form the job among themselves and go on.

* np=3 --min-np 2, rank 1 SIGKILLed mid-run: the job finishes at np=2, every step's global
  batch counted exactly once (total samples), weights as computed without the failure;
* --reset-limit 0: the first lost rank ends the job, saying why;
* np=2 --min-np 2: one rank left is too few; the job ends after --elastic-timeout;
* np=3 --min-np 2, Keras model.fit with tf_hvd.keras.elastic's callbacks, rank 1
  SIGKILLed in epoch 2: the survivors resume at the committed epoch/batch and finish
  every epoch at np=2 with identical weights;
* np=4 --min-np 2, a discovery script listing localhost:2 and 127.0.0.1:2 (two hosts, as in
  Horovod) and --blacklist-cooldown-range 1 1: rank 1 SIGKILLed, localhost is blacklisted
  for 1 s and its other rank stopped, then two new ranks join there;
* np=2 --max-np 3 with a discovery script that later prints a third slot (localhost:3):
  the new rank joins at the next commit, starting from the committed state.
"""

import json
import os
import sys

import numpy as np

from jobrunner import job_env, run, tfhvdrun_cmd

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKER = os.path.join(REPO, "tests", "parallel", "fault_workers", "elastic_worker.py")
KERAS_WORKER = os.path.join(REPO, "tests", "parallel", "fault_workers", "elastic_keras.py")
PY = sys.executable
STEPS, GLOBAL_BATCH = 20, 12


def _job(tmp_path, np_, launcher_args, worker_args=("--steps", STEPS), worker=WORKER):
    result_dir = tmp_path / "job"
    result_dir.mkdir()
    cmd = tfhvdrun_cmd(np_, launcher_args=launcher_args) + [
        PY, worker, "--dir", str(result_dir)] + [str(a) for a in worker_args]
    res = run([str(c) for c in cmd], 240,
              env=job_env({"HOROVOD_GLOO_TIMEOUT_SECONDS": "20"}), cwd=REPO,
              log_path=str(result_dir / "output.log"))
    assert not res.timed_out and not res.survivors, res.describe()
    events = {}
    for r in range(np_ + 3):
        path = result_dir / ("rank%d.events" % r)
        events[r] = [json.loads(l) for l in path.read_text().splitlines()] \
            if path.exists() else []
    launcher = [l for l in res.output.splitlines() if l.startswith("tfhvdrun:")]
    return res, events, launcher


def _event(events, name):
    found = [e for e in events if e["event"] == name]
    return found[0] if found else None


def test_a_killed_rank_leaves_the_job_at_np_minus_one_with_every_sample_counted(tmp_path):
    res, events, launcher = _job(tmp_path, 3, ["--min-np", 2])
    assert res.returncode == 0, res.describe()
    assert launcher == ["tfhvdrun: rank 1 (on localhost) was killed by signal 9 (SIGKILL); "
                        "the job goes on with the 2 rank(s) left (elastic reset 1)"], launcher
    expected_w = -1e-3 * sum(np.arange(s * GLOBAL_BATCH, (s + 1) * GLOBAL_BATCH).mean()
                             for s in range(STEPS))
    for first, new_rank in ((0, 0), (2, 1)):
        reset = _event(events[first], "reset")
        assert reset and (reset["size"], reset["rank"]) == (2, new_rank), events[first]
        done = _event(events[first], "done")
        assert done, res.describe()
        assert (done["step"], done["samples"], done["size"]) == \
            (STEPS, STEPS * GLOBAL_BATCH, 2), done
        assert np.allclose(done["w"], expected_w, rtol=1e-4), (done, expected_w)
    assert _event(events[1], "killing_myself") and not _event(events[1], "done")


def test_keras_fit_resumes_at_the_committed_epoch_and_batch(tmp_path):
    res, events, launcher = _job(tmp_path, 3, ["--min-np", 2], (), worker=KERAS_WORKER)
    assert res.returncode == 0, res.describe()
    assert launcher == ["tfhvdrun: rank 1 (on localhost) was killed by signal 9 (SIGKILL); "
                        "the job goes on with the 2 rank(s) left (elastic reset 1)"], launcher
    # 3 epochs of 8 batches; rank 1 dies as batch 4 of epoch 2 begins (after 11 batches)
    before = [(0, b, 3) for b in range(1, 9)] + [(1, b, 3) for b in range(1, 4)]
    after = [(1, b, 2) for b in range(4, 9)] + [(2, b, 2) for b in range(1, 9)]
    assert _event(events[1], "killing_myself")["batch"] == 3
    assert not _event(events[1], "done")
    weights = []
    for first, new_rank in ((0, 0), (2, 1)):
        batches = [(e["epoch"], e["batch"], e["size"]) for e in events[first]
                   if e["event"] == "batch"]
        assert batches == before + after, batches
        reset = _event(events[first], "reset")
        assert (reset["size"], reset["rank"], reset["epoch"], reset["batch"],
                reset["iterations"]) == (2, new_rank, 1, 3, 11), reset
        done = _event(events[first], "done")
        assert (done["epoch"], done["batch"], done["iterations"], done["size"]) == \
            (3, 0, 24, 2), done
        weights.append(done["weights"])
    assert weights[0] == weights[1]


def test_reset_limit_ends_the_job_with_a_clear_message(tmp_path):
    res, events, launcher = _job(tmp_path, 3, ["--min-np", 1, "--reset-limit", 0])
    assert res.returncode == 128 + 9, res.describe()
    assert launcher[0] == "tfhvdrun: rank 1 (on localhost) was killed by signal 9 (SIGKILL); " \
                          "stopping the job: it has been reset 1 time(s), more than " \
                          "--reset-limit 0 allows", launcher


def test_fewer_ranks_than_min_np_end_the_job_after_the_elastic_timeout(tmp_path):
    res, events, launcher = _job(tmp_path, 2, ["--min-np", 2, "--elastic-timeout", 3])
    assert res.returncode == 128 + 9, res.describe()
    assert launcher[:2] == [
        "tfhvdrun: rank 1 (on localhost) was killed by signal 9 (SIGKILL); 1 rank(s) left, "
        "fewer than --min-np 2: waiting up to 3 s (--elastic-timeout)",
        "tfhvdrun: stopping the job: only 1 rank(s) left for 3 s (--elastic-timeout), "
        "fewer than --min-np 2"], launcher
    assert not _event(events[0], "done")


def test_a_host_the_discovery_script_adds_joins_with_the_committed_state(tmp_path):
    marker = tmp_path / "grow"
    script = tmp_path / "discover.sh"
    script.write_text("#!/bin/sh\nif [ -e %s ]; then echo localhost:3; else echo "
                      "localhost:2; fi\n" % marker)
    script.chmod(0o755)
    res, events, launcher = _job(
        tmp_path, 2, ["--min-np", 2, "--max-np", 3, "--host-discovery-script", script],
        ["--grow-marker", marker, "--steps", 12, "--victim", -1])
    assert res.returncode == 0, res.describe()
    assert launcher == ["tfhvdrun: host discovery: 3 slot(s) on localhost; started rank(s) "
                        "2, which the running ranks wait for at their next commit (at most 600 s, "
                        "--elastic-timeout) to hand them the committed state"], launcher
    joined = _event(events[2], "train_begins")
    assert joined and joined["size"] == 3 and joined["rank"] == 2, events[2]
    # it starts from the state the others committed last, where they start again too
    again = [e for e in events[0] if e["event"] == "train_begins"][1]
    assert again["size"] == 3 and 0 < again["step"] == joined["step"], (again, joined)
    assert joined["w"] == again["w"] and joined["samples"] == again["samples"]
    for first in (0, 1, 2):
        done = _event(events[first], "done")
        assert done and (done["step"], done["samples"], done["size"]) == \
            (12, 12 * GLOBAL_BATCH, 3), events[first]


def test_a_failed_rank_s_host_takes_new_ranks_after_the_blacklist_cooldown(tmp_path):
    # Hosts are keyed by the name the script prints (Horovod): localhost and 127.0.0.1
    # are two hosts of 2 slots. -np 4 fills both; rank 1 (localhost) is SIGKILLed:
    # localhost is blacklisted for 1 s and its other rank (0) stopped; ranks 2 and 3
    # (127.0.0.1) go on at np=2 and wait at step 3 until localhost takes two new ranks.
    script = tmp_path / "discover.sh"
    script.write_text("#!/bin/sh\necho localhost:2\necho 127.0.0.1:2\n")
    script.chmod(0o755)
    res, events, launcher = _job(
        tmp_path, 4, ["--min-np", 2, "--host-discovery-script", script,
                      "--blacklist-cooldown-range", 1, 1],
        ["--grow-marker", tmp_path / "unused", "--steps", 6, "--kill-at", 2])
    assert res.returncode == 0, res.describe()
    assert launcher == [
        "tfhvdrun: rank 1 (on localhost) was killed by signal 9 (SIGKILL); the job goes on "
        "with the 2 rank(s) left (elastic reset 1)",
        "tfhvdrun: blacklisting localhost after rank 1's failure (failure 1 of this host): "
        "no rank starts on it for 1.0 s (--blacklist-cooldown-range 1 1); stopping its "
        "other rank(s) 0",
        "tfhvdrun: localhost's blacklist cooldown is over: ranks may start on it again",
        "tfhvdrun: host discovery: 2 slot(s) on localhost; started rank(s) 4, 5, which the "
        "running ranks wait for at their next commit (at most 600 s, --elastic-timeout) to "
        "hand them the committed state"], launcher
    for new in (4, 5):
        joined = _event(events[new], "train_begins")
        assert joined and joined["size"] == 4 and joined["step"] == 3, events[new]
    for first in (2, 3, 4, 5):
        done = _event(events[first], "done")
        assert done and (done["step"], done["samples"], done["size"]) == \
            (6, 6 * GLOBAL_BATCH, 4), events[first]
    assert not _event(events[0], "done")

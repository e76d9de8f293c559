"""Killed at random moments, a job that saves every step continues as if it had never
stopped (fault_workers/chaos_train.py, restarted by tfhvdrun --max-restarts):

* a seeded schedule of SIGKILLs (6 in a Keras fit with a sharded optimizer, 5 in a
  tf.function loop over a DistributedEmbedding, one of them while both ranks write their
  rows), before, during and after saves; each kill costs one restart, and tfhvdrun names
  the killed rank and the one stopped in consequence each time;
* every restart loads a whole step: what each rank loaded is, fingerprint for
  fingerprint, what that step held when it was saved, and all ranks loaded the same step;
* the final weights, the optimizer's whole state and the whole tables equal those of an
  uninterrupted run of the same steps exactly (the same arithmetic in the same order:
  deterministic ops, data a function of the step);
* 3 ranks resume from the 2 ranks' last step (sharded slots and table rows re-sharded)
  and hold exactly its state, then train and save at np=3.
"""

import json
import os
import random
import re
import sys

import numpy as np
import pytest

from jobrunner import job_env, run, tfhvdrun_cmd
from tf_hvd.checkpoint import Step

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKER = os.path.join(REPO, "tests", "parallel", "fault_workers", "chaos_train.py")
PY = sys.executable
SEED = 59
# mode: (global steps, kills, phases a kill may take)
PLANS = {"fit": (16, 6, ["train", "write", "publish", "saved"]),
         "loop": (14, 5, ["train", "write", "publish", "saved"])}


def kill_schedule(mode, seed=SEED):
    """[{"restart", "ranks", "step", "phase"}]: one kill a run at strictly growing steps
    (so every run reaches its kill), every phase used; in the loop (every rank writes
    rows) one kill takes both ranks while they write."""
    steps, kills, phases = PLANS[mode]
    rng = random.Random("%s-%d" % (mode, seed))
    at = sorted(rng.sample(range(2, steps), kills))
    chosen = phases + [rng.choice(phases) for _ in range(kills - len(phases))]
    rng.shuffle(chosen)
    out = []
    for i, (step, phase) in enumerate(zip(at, chosen)):
        if phase == "publish" or (phase == "write" and mode == "fit"):
            ranks = [0]            # only rank 0 publishes; in fit only rank 0 writes
        else:
            ranks = [rng.randrange(2)]
        out.append({"restart": i, "ranks": ranks, "step": step, "phase": phase})
    if mode == "loop":
        both = next(k for k in out if k["phase"] == "write")
        both["ranks"] = [0, 1]
    return out


def _events(directory, rank):
    with open(os.path.join(directory, "rank%d.events" % rank)) as f:
        return [json.loads(line) for line in f if line.strip()]


def _job(tmp, name, mode, np_=2, schedule=None, extra=()):
    directory = tmp / name
    directory.mkdir(exist_ok=True)
    args = ["--max-restarts", len(schedule)] if schedule else []
    cmd = tfhvdrun_cmd(np_, launcher_args=args) + [
        PY, WORKER, "--mode", mode, "--dir", str(directory),
        "--steps", str(PLANS[mode][0])] + list(extra)
    if schedule:
        path = directory / "kills.json"
        path.write_text(json.dumps(schedule))
        cmd += ["--schedule", str(path)]
    res = run(cmd, 420, env=job_env({"HOROVOD_GLOO_TIMEOUT_SECONDS": "20"}), cwd=REPO,
              log_path=str(directory / "output.log"))
    assert not res.timed_out and not res.survivors and res.returncode == 0, res.describe()
    return res, str(directory)


def _final(directory, rank):
    with np.load(os.path.join(directory, "final.rank%d.npz" % rank)) as f:
        return {k: f[k] for k in f.files}


def _check_every_restore_loaded_a_whole_step(directory, schedule):
    saved = {}  # step -> fingerprint of the state saved as that step, per rank
    restored = {}
    for rank in (0, 1):
        for e in _events(directory, rank):
            if e["event"] == "saving":
                fp = saved.setdefault((rank, e["step"]), e["fp"])
                assert fp == e["fp"], ("step %d saved with two states" % e["step"], e)
            elif e["event"] == "restored":
                restored[(rank, e["restart"])] = (e["step"], e["fp"])
    runs = len(schedule) + 1
    for restart in range(runs):
        steps = set(restored[(r, restart)][0] for r in (0, 1))
        assert len(steps) == 1, ("the ranks restored different steps", restart, restored)
        for rank in (0, 1):
            step, fp = restored[(rank, restart)]
            if restart == 0:
                assert step == 0
                continue
            assert saved[(rank, step)] == fp, ("rank %d loaded step %d unlike it was saved"
                                              % (rank, step), restart)
            kill = schedule[restart - 1]
            # the killed run's step was published unless the kill came before that
            published = kill["phase"] == "saved"
            assert step == (kill["step"] if published else kill["step"] - 1), (kill, step)
    return restored


def _check_kills(res, directory, schedule):
    killed = {}
    for rank in (0, 1):
        for e in _events(directory, rank):
            if e["event"] == "killed":
                killed.setdefault(e["restart"], []).append((rank, e["step"], e["phase"]))
    for k in schedule:
        got = killed.get(k["restart"], [])
        assert got and all(step == k["step"] and phase == k["phase"]
                           for _, step, phase in got), (k, got)
        assert set(r for r, _, _ in got) <= set(k["ranks"]), (k, got)
    restarts = re.findall(r"^tfhvdrun: restarting every rank with a fresh rendezvous "
                          r"\(restart (\d+) of (\d+)\) because rank (\d) \(on localhost, pid \d+\) "
                          r"was killed by signal 9 \(SIGKILL\); rank (\d) stopped in "
                          r"consequence$", res.output, re.M)
    n = len(schedule)
    assert [r[:2] for r in restarts] == [(str(i + 1), str(n)) for i in range(n)], \
        res.describe()
    for k, (_, _, culprit, other) in zip(schedule, restarts):
        assert int(culprit) in k["ranks"] and int(other) == 1 - int(culprit), (k, restarts)


@pytest.mark.parametrize("mode", ["fit", "loop"])
def test_a_job_killed_at_random_moments_continues_as_if_it_had_never_stopped(tmp_path, mode):
    schedule = kill_schedule(mode)
    res, chaos = _job(tmp_path, "chaos", mode, schedule=schedule)
    _check_kills(res, chaos, schedule)
    _check_every_restore_loaded_a_whole_step(chaos, schedule)
    if any(k["phase"] in ("write", "publish") for k in schedule):
        assert "a half-written step (no manifest" in res.output, res.describe()
    _, plain = _job(tmp_path, "plain", mode)
    for rank in (0, 1):
        got, want = _final(chaos, rank), _final(plain, rank)
        assert sorted(got) == sorted(want)
        for key in want:
            assert np.array_equal(got[key], want[key]), (mode, rank, key)

    # 3 ranks resume from the 2 ranks' last step, holding exactly its whole state
    res3, _ = _job(tmp_path, "chaos", mode, np_=3, extra=["--check-restore"])
    done = [e for e in _events(chaos, 0) if e["event"] == "done"][0]
    for rank in range(3):
        at3 = [e for e in _events(chaos, rank) if e["event"] == "restored" and e["size"] == 3]
        assert len(at3) == 1 and at3[0]["fp"] == done["fp"], (rank, at3, done)
    assert Step.newest(os.path.join(chaos, "ckpt")).size == 3

"""Elastic Keras jobs re-shard a sharded optimizer from the last commit (issue 40).

One schedule (fault_workers/elastic_sharded.py), run twice: with
``DistributedOptimizer(Adam, sharded=True)`` and with the unsharded one.

    tfhvdrun -np 2 --min-np 2 --max-np 3 --host-discovery-script discover.sh ...

with hosts 127.0.0.1:1 and 127.0.0.2:1 (one rank each, so that a host's failure stops no
other rank). The job trains at np=2; after batch 2 of epoch 1 the discovery script lists a
third host (127.0.0.3:1) and the newcomer joins at a commit (np=3, the state handed over by rank 0);
the newcomer SIGKILLs itself in epoch 2 and the two others roll back to their last commit
and finish at np=2. Every rank records, after every sync and at the end, the weights and
the whole optimizer state (the sharded one's gathered from every rank's slices): the
sharded job's equal the unsharded job's at every point, on every rank, and the sharded
slots are laid out anew at each size (25/24 elements of the 49 parameters at np=2,
17/16/16 at np=3).
"""

import json
import os

import numpy as np
import pytest

from jobrunner import PYTHON, REPO, job_env, run, tfhvdrun_cmd

WORKER = os.path.join(REPO, "tests", "parallel", "fault_workers", "elastic_sharded.py")
# (first rank, size, rank, epoch, batch, iterations) of every "synced" event: the start at
# np=2, the newcomer's join at np=3 (batch 2 of epoch 1: 10 steps), the rollback at np=2
# (batch 3 of epoch 2: 19 steps)
SYNCS = {0: [(2, 0, 0, 0, 0), (3, 0, 1, 2, 10), (2, 0, 2, 3, 19)],
         1: [(2, 1, 0, 0, 0), (3, 1, 1, 2, 10), (2, 1, 2, 3, 19)],
         2: [(3, 2, 1, 2, 10)]}
RTOL, ATOL = 1e-5, 1e-6


def _job(directory, sharded):
    directory.mkdir()
    discover = directory / "discover.sh"
    marker = directory / "grow"
    # one slot per host: the topology is the same on every rank (cross_size = size)
    discover.write_text("#!/bin/sh\necho 127.0.0.1:1\necho 127.0.0.2:1\n"
                        "[ -e %s ] && echo 127.0.0.3:1\nexit 0\n" % marker)
    discover.chmod(0o755)
    cmd = tfhvdrun_cmd(2, launcher_args=[
        "--min-np", 2, "--max-np", 3, "--host-discovery-script", discover]) + [
        PYTHON, WORKER, "--dir", str(directory), "--grow-marker", str(marker)] + (
        ["--sharded"] if sharded else [])
    res = run([str(c) for c in cmd], 240, env=job_env({"HOROVOD_GLOO_TIMEOUT_SECONDS": "20"}),
              cwd=REPO, log_path=str(directory / "output.log"))
    assert not res.timed_out and not res.survivors, res.describe()
    assert res.returncode == 0, res.describe()
    events = {}
    for r in range(3):
        path = directory / ("rank%d.events" % r)
        events[r] = [json.loads(l) for l in path.read_text().splitlines()] \
            if path.exists() else []
    return events


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    base = tmp_path_factory.mktemp("elastic_sharded")
    return _job(base / "sharded", True), _job(base / "unsharded", False)


def _syncs(events, first):
    return [e for e in events[first] if e["event"] == "synced"]


def _counters(e):
    return (e["size"], e["rank"], e["epoch"], e["batch"], e["iterations"])


def test_every_sync_and_the_end_equal_the_unsharded_run_on_every_rank(jobs):
    sharded, unsharded = jobs
    for first, expected in SYNCS.items():
        for run_events in (sharded, unsharded):
            assert [_counters(e) for e in _syncs(run_events, first)] == expected, \
                run_events[first]
        points = list(zip(_syncs(sharded, first), _syncs(unsharded, first)))
        if first != 2:   # the newcomer was killed before the end
            done = [[e for e in ev[first] if e["event"] == "done"][0]
                    for ev in (sharded, unsharded)]
            assert _counters(done[0]) == _counters(done[1]) == (2, first, 3, 0, 24), done
            points.append(tuple(done))
        for s, u in points:
            assert len(s["optimizer"]) == len(u["optimizer"]) == 2 + 2 * 49
            np.testing.assert_allclose(s["weights"], u["weights"], rtol=RTOL, atol=ATOL)
            np.testing.assert_allclose(s["optimizer"], u["optimizer"], rtol=RTOL, atol=ATOL)
    # the same on every rank at every point
    for run_events in (sharded, unsharded):
        for k in range(3):
            at = [_syncs(run_events, first)[k] for first in (0, 1)] + (
                _syncs(run_events, 2) if k == 1 else [])
            assert all(e["weights"] == at[0]["weights"] and
                       e["optimizer"] == at[0]["optimizer"] for e in at), k


def test_the_slots_are_laid_out_anew_at_each_size(jobs):
    sharded, unsharded = jobs
    # Adam: iterations, learning rate, then momentum and velocity of the flat slice
    slices = {(2, 0): 25, (2, 1): 24, (3, 0): 17, (3, 1): 16, (3, 2): 16}
    for first in (0, 1, 2):
        for e in _syncs(sharded, first):
            n = slices[(e["size"], e["rank"])]
            assert e["shapes"] == [[], [], [n], [n]], e["shapes"]
    assert all(e["shapes"] is None for e in _syncs(unsharded, 0))

"""Autotune at np=2 on Gloo (workers/autotune_checks.py), bounded in time: exact
results while the tuner switches values, the same switches at the same round on
every rank, HOROVOD_AUTOTUNE_LOG with one row per sample, and the knob set in
the environment (HOROVOD_CYCLE_TIME) left alone. test_multihost.py runs the same
worker across two hosts, where hierarchical allreduce is tuned too."""

import csv
import json
import os

from collective_launch import assert_job_ok, run_job

TIMEOUT = 240
MAX_SAMPLES = 5


def autotune_env(log):
    """Small samples; HOROVOD_CYCLE_TIME set, so never tuned."""
    return {"HOROVOD_AUTOTUNE": "1", "HOROVOD_AUTOTUNE_LOG": log,
            "HOROVOD_AUTOTUNE_WARMUP_SAMPLES": "1", "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE": "3",
            "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES": str(MAX_SAMPLES),
            "HOROVOD_CYCLE_TIME": "1"}


def check_histories(result_dir, np_, log, hierarchical_tuned):
    """Every rank's switches (history<r>.json) against each other and rank 0's log."""
    histories = []
    for r in range(np_):
        with open(os.path.join(result_dir, "history%d.json" % r)) as f:
            histories.append([tuple(h) for h in json.load(f)])
    # The same values at the same round on every rank; rounds increase.
    for r in range(1, np_):
        assert histories[r] == histories[0], (r, histories)
    rounds = [h[0] for h in histories[0]]
    assert rounds == sorted(rounds) and len(set(rounds)) == len(rounds), rounds
    assert len(histories[0]) == MAX_SAMPLES
    for h in histories[0]:
        assert h[2] == 1.0, h  # HOROVOD_CYCLE_TIME was set
        assert 0 <= h[1] <= 64 * 1024 * 1024 and h[1] % (256 * 1024) == 0, h
        if not hierarchical_tuned:
            assert h[4] is False, h
    with open(log) as f:
        rows = list(csv.DictReader(f))
    assert [int(row["sample"]) for row in rows] == list(range(1, MAX_SAMPLES + 1))
    # Sample 1 measured the start values; sample k+1 the values of switch k.
    assert (int(rows[0]["fusion_threshold_bytes"]), rows[0]["response_cache"],
            rows[0]["hierarchical_allreduce"]) == (64 * 1024 * 1024, "1", "0")
    for row, h in zip(rows[1:], histories[0]):
        assert (int(row["fusion_threshold_bytes"]), float(row["cycle_time_ms"]),
                row["response_cache"] == "1", row["hierarchical_allreduce"] == "1") == h[1:], (
            row, h)
    assert all(float(row["score_bytes_per_second"]) > 0 for row in rows)
    # The last switch keeps the best sample's values.
    best = max(rows, key=lambda row: float(row["score_bytes_per_second"]))
    final = histories[0][-1]
    assert (int(best["fusion_threshold_bytes"]), best["response_cache"] == "1",
            best["hierarchical_allreduce"] == "1") == (final[1], final[3], final[4]), (
        best, final)
    return histories[0]


def test_autotune_switches_every_rank_at_the_same_round(tmp_path):
    result_dir = str(tmp_path / "autotune")
    log = os.path.join(result_dir, "autotune.csv")
    code, output, seconds, cmd = run_job(2, "gloo", "autotune_checks.py", result_dir,
                                         env=autotune_env(log), timeout=TIMEOUT)
    assert_job_ok(2, result_dir, code, output, seconds, cmd, timeout=TIMEOUT)
    check_histories(result_dir, 2, log, hierarchical_tuned=False)

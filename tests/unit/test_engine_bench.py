"""The engines benchmark's bookkeeping (python/benchmarks/engine_bench.py, engine_fit.py):
reading the ranks' records out of a job's output, and the per-engine statistics."""

import os
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "python", "benchmarks")
sys.path.insert(0, BENCH)

import engine_bench  # noqa: E402
import engine_fit  # noqa: E402


def test_parse_results_reads_every_launchers_prefix_in_rank_order():
    text = "\n".join([
        "[1]<stdout>:ENGINE_FIT {\"rank\": 1, \"samples_per_s\": 10.0}",
        "some log line",
        "0: ENGINE_FIT {\"rank\": 0, \"samples_per_s\": 12.5}",
        "ENGINE_FIT {broken",
        "ENGINE_RAY {\"connect_s\": 1.0}"])
    assert engine_fit.parse_results(text) == [{"rank": 0, "samples_per_s": 12.5},
                                              {"rank": 1, "samples_per_s": 10.0}]


def _run(engine, round_, sps, ok=True):
    return {"engine": engine, "round": round_, "status": "ok" if ok else "failed",
            "samples_per_s": sps, "start_to_init_s": 10.0 + round_,
            "start_to_timed_s": 12.0 + round_}


def test_summarize_medians_spread_and_ratios_to_tfhvdrun():
    runs = [_run("tfhvdrun", 0, 100.0), _run("slurm", 0, 99.0), _run("ray", 0, 90.0),
            _run("tfhvdrun", 1, 200.0), _run("slurm", 1, 190.0), _run("ray", 1, 0.0, False),
            _run("tfhvdrun", 2, 150.0), _run("slurm", 2, 160.0), _run("ray", 2, 140.0)]
    got = engine_bench.summarize(runs)
    assert got["tfhvdrun"]["samples_per_s"] == {"n": 3, "median": 150.0, "min": 100.0,
                                                "max": 200.0, "spread_pct": 100.0 * 100 / 150}
    assert got["tfhvdrun"]["start_to_init_s"]["median"] == 11.0
    assert "ratio_of_medians" not in got["tfhvdrun"]
    assert got["slurm"]["ratio_of_medians"] == pytest.approx(160.0 / 150.0)
    assert got["slurm"]["meets_0_97"] is True
    assert sorted(round(r, 4) for r in [0.99, 0.95, 160.0 / 150.0]) == \
        [round(got["slurm"]["per_round_ratio"][k], 4) for k in ("min", "median", "max")]
    # the failed Ray round counts as a run but not in the statistics or the pairs
    assert (got["ray"]["runs"], got["ray"]["runs_ok"]) == (3, 2)
    assert got["ray"]["per_round_samples_per_s"] == [90.0, 140.0]
    assert got["ray"]["ratio_of_medians"] == pytest.approx(115.0 / 150.0)
    assert got["ray"]["meets_0_97"] is False
    assert got["ray"]["per_round_ratio"]["n"] == 2
    assert got["ray"]["per_round_ratio"]["median"] == pytest.approx((0.9 + 140.0 / 150) / 2)


def test_make_config_quick_and_full():
    assert engine_bench.make_config(True) == {
        "model": "mlp", "batch_per_worker": 64, "steps": 100, "warmup": 10,
        "learning_rate": 0.01, "momentum": 0.9}
    assert (engine_bench.make_config(False)["steps"],
            engine_bench.make_config(False)["warmup"]) == (300, 20)

"""The statistics behind compare.py's rounds: spreads, verdicts, the median round
of each figure, per-round ratios, the busy process of the contention mode, and the
bound's ranks counted over the time they all ran."""

import os
import sys
import time

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), "python", "benchmarks")
sys.path.insert(0, BENCH)

import compare  # noqa: E402
import contention  # noqa: E402
from lib import rounds  # noqa: E402
import training_bench  # noqa: E402


def test_spread_leaves_out_missing_rounds():
    s = rounds.spread([3.0, None, 1.0, 2.0])
    assert (s["n"], s["median"], s["min"], s["max"]) == (3, 2.0, 1.0, 3.0)
    assert s["values"] == [3.0, None, 1.0, 2.0]
    assert rounds.spread([None])["median"] is None


@pytest.mark.parametrize("ratios,comparison,target,expected", [
    ([0.91, 0.95, 0.99], ">=", 0.9, "met"),
    ([0.85, 0.95], ">=", 0.9, "unclear"),
    ([0.5, 0.8], ">=", 0.9, "not met"),
    ([0.9], ">=", 0.9, "met"),
    ([0.04, 0.05], "<=", 0.05, "met"),
    ([0.04, 0.06], "<=", 0.05, "unclear"),
    ([0.06, None], "<=", 0.05, "not met"),
    ([None, None], ">=", 1.0, None),
])
def test_verdict_needs_the_whole_spread(ratios, comparison, target, expected):
    assert rounds.verdict(ratios, comparison, target) == expected


def test_fmt_spread():
    assert rounds.fmt_spread(rounds.spread([0.8, 0.76, 0.88])) == "0.800 [0.760-0.880]"
    assert rounds.fmt_spread(rounds.spread([2.0])) == "2.00"
    assert rounds.fmt_spread(None) == "-"


def test_round_order_flips():
    assert rounds.round_order("abc", 0) == ["a", "b", "c"]
    assert rounds.round_order("abc", 1) == ["c", "b", "a"]
    assert rounds.round_order("abc", 2) == ["a", "b", "c"]


def test_merge_records_picks_the_median_round():
    per_round = [[{"k": "x", "v": 5.0}, {"k": "y", "v": 1.0}],
                 [{"k": "x", "v": 9.0}],
                 [{"k": "x", "v": 7.0}, {"k": "y", "v": 3.0}]]
    merged = rounds.merge_records(per_round, lambda r: r["k"], lambda r: r["v"])
    x, y = merged
    assert (x["k"], x["v"], x["rounds"]["picked_round"]) == ("x", 7.0, 3)
    assert (x["rounds"]["min"], x["rounds"]["max"]) == (5.0, 9.0)
    # two rounds, higher is better: the lower of the two middle values
    assert (y["v"], y["rounds"]["values"]) == (1.0, [1.0, None, 3.0])
    low = rounds.merge_records(per_round[:2], lambda r: r["k"], lambda r: r["v"],
                               lower_is_better=True)
    assert low[0]["v"] == 9.0  # latency: the higher (worse) of two middle values


def test_aggregate_takes_ratios_per_round_not_of_medians():
    def check(mine, theirs):
        return {"name": "t", "alternative": "alt", "tf_hvd_value": mine,
                "alternative_value": theirs, "ratio": mine / theirs,
                "comparison": ">=", "target": 0.9, "detail": "d%s" % mine}
    per_round = [[check(10.0, 10.0)], [check(4.0, 5.0)], [check(9.0, 9.5)]]
    (t,) = compare.aggregate(per_round)
    assert t["ratio_spread"]["values"] == [1.0, 0.8, 9.0 / 9.5]
    assert t["ratio"] == 9.0 / 9.5          # median of the per-round ratios
    assert t["tf_hvd_value"] == 9.0 and t["alternative_value"] == 9.5
    assert (t["verdict"], t["met"], t["detail"]) == ("unclear", None, "d9.0")


def test_aggregate_rejects_rounds_that_differ():
    with pytest.raises(RuntimeError, match="the rounds' checks differ at a"):
        compare.aggregate([[{"name": "a"}], [{"name": "b"}]])


def test_busy_process_runs_and_is_stopped():
    with rounds.BusyProcess() as busy:
        time.sleep(1.0)
        assert busy.proc.poll() is None
    assert busy.proc.returncode == -9  # killed (SIGKILL) and reaped on leaving the block
    info = busy.describe()
    assert info["busy_process"] == "while True: pass"
    assert info["seconds"] >= 1.0
    assert info["cpu_seconds"] is not None and info["cpu_seconds"] > 0


def _stamps(start, periods):
    """Step-end stamps from start: [(steps, seconds per step), ...] in turn."""
    out, t = [start], start
    for steps, period in periods:
        for _ in range(steps):
            t += period
            out.append(t)
    return out


def test_bound_counts_ranks_over_the_time_they_all_ran():
    # rank 0 runs 100 steps of 1 ms and ends at 0.1 s; rank 1 shares its core with a
    # busy process (2 ms steps) until then and runs alone (1 ms) after it: its steps
    # after 0.1 s are not what the two computed together
    fast, slow = _stamps(0.0, [(100, 1e-3)]), _stamps(0.0, [(50, 2e-3), (50, 1e-3)])
    window = training_bench.common_window([(fast[0], fast[-1]), (slow[0], slow[-1])])
    assert window == pytest.approx((0.0, 0.1))
    rates = [training_bench.rate_within(w, window[0], window[1], 64) for w in (fast, slow)]
    assert rates == pytest.approx([64000.0, 32000.0])
    own_slow = 100 * 64 / (slow[-1] - slow[0])  # its whole window: 42667 samples/s
    assert rates[1] < 0.8 * own_slow


def test_bound_window_needs_overlap():
    # windows that hardly overlap (separate hosts' clocks): no shared window
    assert training_bench.common_window([(0.0, 1.0), (0.8, 1.8)]) is None
    assert training_bench.common_window([(0.0, 1.0), (0.4, 1.4)]) == (0.4, 1.0)
    assert training_bench.rate_within([0.0, 0.5, 1.0], 0.6, 0.9, 64) is None


def _contention_runs(fit, own_bound, separate):
    def rec(contender, value, bound=None):
        r = {"contender": contender, "model": "mlp", "mode": "fit", "samples_per_s": value,
             "finite_loss": True}
        if bound is not None:
            r["same_processes_bound"] = {"samples_per_s": bound, "finite_loss": True}
        return {"result": {"parts": {"training": [r]}}}
    runs = {hvd: rec(hvd, fit, own_bound) for hvd in ("tf_hvd_gloo", "tf_hvd_mpi")}
    runs["no_allreduce"] = rec("no_allreduce", separate)
    return runs


def test_contention_uses_each_contenders_own_bound():
    # quiet: fit 700 of its own bound 1000; busy: 450 of 600 (the busy loop took the
    # bound's share too); the separate job, whose ranks never meet, kept 950
    per_round = [{"quiet": _contention_runs(700.0, 1000.0, 1000.0),
                  "busy": _contention_runs(450.0, 600.0, 950.0)}] * 3
    rows, extras = contention.evaluate(per_round)
    row = [r for r in rows if r["tf_hvd"] == "tf_hvd_gloo"][0]
    assert row["fit_vs_bound_quiet"]["median"] == pytest.approx(0.7)
    assert row["fit_vs_bound_busy"]["median"] == pytest.approx(0.75)
    assert row["ratio"] == pytest.approx(0.75 / 0.7)
    assert row["verdict"] == "met"
    assert row["own_bound_busy_vs_quiet"]["median"] == pytest.approx(0.6)
    assert row["fit_vs_separate_bound_busy"]["median"] == pytest.approx(450.0 / 950.0)
    assert extras["bound_busy_vs_quiet"]["median"] == pytest.approx(0.95)
    # no own bound, no ratio
    bare = _contention_runs(700.0, None, 1000.0)
    rows, _ = contention.evaluate([{"quiet": bare, "busy": bare}])
    assert rows[0]["ratio"] is None and rows[0]["verdict"] is None
